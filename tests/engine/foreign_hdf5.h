// An HDF5 file written through the HDF5 library directly, as another program (h5py) would: no user
// block, so no cnn checksum table. One float dataset, "fc.bias" = {1, 2, 3}.
#pragma once
#include <hdf5.h>

#include <filesystem>

namespace io_test {

// latest_format: superblock version 3 (HDF5's libver "latest") instead of the default version 0.
inline void write_foreign_hdf5(const std::filesystem::path& path, bool latest_format = false) {
  const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  if (latest_format) H5Pset_libver_bounds(access, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access);
  const hsize_t dims[1] = {3};
  const hid_t space = H5Screate_simple(1, dims, nullptr);
  const hid_t dataset = H5Dcreate2(file, "fc.bias", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const float values[3] = {1.0f, 2.0f, 3.0f};
  H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
  H5Dclose(dataset);
  H5Sclose(space);
  H5Fclose(file);
  H5Pclose(access);
}

}  // namespace io_test
