#include "layers/weights.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "engine/io/hdf5.h"
#include "engine/io/safetensors.h"
#include "engine/names_in_words.h"
#include "engine/tape.h"

namespace cnn {

namespace {
// Permutes a 4-D CPU tensor: out[a, b, c, d] = in[a, perm...] with the element size as the unit.
// to_last: [A,B,C,D] -> [A,C,D,B]; otherwise [A,B,C,D] -> [A,D,B,C].
Tensor permute4(const Tensor& t, bool to_last) {
  CNN_CHECK(t.dim() == 4, "layout conversion needs a 4-D tensor, got ", describe(t));
  const Tensor in = t.device().is_cpu() ? t : t.detach().to(Device::cpu());
  const int64_t a = in.size(0), b = in.size(1), c = in.size(2), d = in.size(3);
  const Shape out_shape = to_last ? Shape{a, c, d, b} : Shape{a, d, b, c};
  Tensor out = Tensor::empty(out_shape, in.dtype());
  const size_t bytes = static_cast<size_t>(dtype_size(in.dtype()));
  const char* src = static_cast<const char*>(in.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t l = 0; l < d; ++l) {
          const int64_t from = ((i * b + j) * c + k) * d + l;
          const int64_t to = to_last ? ((i * c + k) * d + l) * b + j : ((i * d + l) * b + j) * c + k;
          std::memcpy(dst + to * bytes, src + from * bytes, bytes);
        }
  return out;
}

bool is_safetensors(const std::filesystem::path& path) { return path.extension() == ".safetensors"; }

void check_extension(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  CNN_CHECK(ext == ".safetensors" || ext == ".h5" || ext == ".hdf5", "weights file ", path.string(),
            ": unknown extension '", ext, "'; use .h5 (engine layout) or .safetensors (torchvision layout)");
}

// A conv weight's shape in a file's layout: OIHW for the torch layout, the engine's [O,KH,KW,I] else.
Shape in_file_layout(const Shape& engine_shape, WeightsLayout layout) {
  if (layout != WeightsLayout::torch || engine_shape.rank() != 4) return engine_shape;
  return Shape{engine_shape[0], engine_shape[3], engine_shape[1], engine_shape[2]};
}

// The shape mismatch of one tensor, in the file's layout, and the model option that explains it when
// one does: the stem conv's input channels ([model] in_channels) or the classifier's outputs
// ([model] num_classes).
struct ShapeMismatch {
  std::string text, hint;
};
ShapeMismatch describe_mismatch(const std::string& name, const Shape& file, const Shape& model_engine,
                                WeightsLayout layout, bool first_conv) {
  const Shape model = in_file_layout(model_engine, layout);
  const char* layout_name = model.rank() != 4 ? "" : layout == WeightsLayout::torch ? " (O, I, kH, kW)" : " (O, kH, kW, I)";
  ShapeMismatch m{name + ": file " + file.str() + " vs model " + model.str() + layout_name, ""};
  if (file.rank() != model.rank()) return m;
  const int in_dim = layout == WeightsLayout::torch ? 1 : 3;
  const auto differ_only_in = [&](int dim) {
    for (int d = 0; d < file.rank(); ++d)
      if ((file[d] != model[d]) != (d == dim)) return false;
    return true;
  };
  if (model.rank() == 4 && first_conv && differ_only_in(in_dim))
    m.hint = "the file's model takes " + std::to_string(file[in_dim]) + "-channel images and this one " +
             std::to_string(model[in_dim]) + ": set [model] in_channels = " + std::to_string(file[in_dim]);
  else if ((model.rank() == 2 || model.rank() == 1) && differ_only_in(0))
    m.hint = "the file's classifier has " + std::to_string(file[0]) + " outputs and this model's " +
             std::to_string(model[0]) + ": set [model] num_classes = " + std::to_string(file[0]) +
             " (or, to train a new head on these weights, load them with [model] pretrained and pretrained_head = false)";
  return m;
}

std::string first_few(const std::vector<std::string>& names) { return names_in_words(names, 5); }
}  // namespace

Tensor nchw_to_nhwc(const Tensor& t) { return permute4(t, true); }
Tensor nhwc_to_nchw(const Tensor& t) { return permute4(t, false); }

std::string WeightsReport::summary() const {
  std::ostringstream out;
  out << loaded << " tensors loaded";
  if (!missing.empty()) out << "; " << missing.size() << " missing from the file: " << first_few(missing);
  if (!unexpected.empty()) out << "; " << unexpected.size() << " unexpected in the file: " << first_few(unexpected);
  if (!mismatched.empty()) out << "; " << mismatched.size() << " of another shape: " << first_few(mismatched);
  return out.str();
}

io::NamedTensors export_state(const Module& model, WeightsLayout layout) {
  io::NamedTensors out;
  for (const StateEntry& e : model.state_dict()) {
    CNN_CHECK(e.tensor.defined(), "cannot save ", e.name, ": the model's tensors are not created yet (initialize it first)");
    Tensor t = e.tensor.detach();
    if (layout == WeightsLayout::torch && t.dim() == 4) t = nhwc_to_nchw(t);
    out.emplace_back(e.name, t);
  }
  return out;
}

WeightsReport import_state(Module& model, const io::NamedTensors& tensors, WeightsLayout layout,
                           bool only_matching_shapes, const std::string& source) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : tensors) by_name[name] = &t;
  WeightsReport report;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, converted source), applied when all is checked
  std::map<std::string, bool> known;
  bool seen_conv = false;
  size_t unexplained = 0;  // mismatches that no model option explains
  for (const StateEntry& e : model.state_dict()) {
    known[e.name] = true;
    auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      report.missing.push_back(e.name);
      continue;
    }
    Tensor src = *it->second;
    if (layout == WeightsLayout::torch && src.dim() == 4) src = nchw_to_nhwc(src);
    const bool first_conv = e.shape.rank() == 4 && !seen_conv;
    seen_conv = seen_conv || e.shape.rank() == 4;
    if (!(src.shape() == e.shape)) {
      const ShapeMismatch m = describe_mismatch(e.name, it->second->shape(), e.shape, layout, first_conv);
      report.mismatched.push_back(m.text);
      if (m.hint.empty()) ++unexplained;
      if (!m.hint.empty() && std::find(report.hints.begin(), report.hints.end(), m.hint) == report.hints.end())
        report.hints.push_back(m.hint);
      continue;
    }
    CNN_CHECK(e.tensor.defined(), "cannot load into ", e.name, ": the model's tensors are not created yet");
    // Floats convert to floats (f16 weights into an f32 model); integers into floats or back, or into
    // another integer width, would load wrong values without a word.
    const DType want = e.tensor.dtype(), have = src.dtype();
    CNN_CHECK(want == have || (is_floating(want) && is_floating(have)), "weights ", source, ": tensor '", e.name, "' holds ",
              dtype_name(have), " values but the model's is ", dtype_name(want),
              "; only floating-point tensors are converted to the model's dtype. The file was not written for this model "
              "(or was converted wrongly)");
    copies.emplace_back(e.tensor, src);
  }
  for (const auto& [name, t] : tensors)
    if (!known.count(name)) report.unexpected.push_back(name);
  if (!only_matching_shapes && !report.complete()) {
    std::string advice;
    for (const std::string& hint : report.hints) advice += ". " + hint;
    if (unexplained > 0 || !report.missing.empty() || !report.unexpected.empty())
      advice += ". The file was written for another model: check [model] name and its options";
    throw Error("weights " + source + " do not fit the model: " + report.summary() + advice);
  }
  NoGrad no_grad;
  for (auto& [dst, src] : copies) {
    Tensor d = dst;
    d.copy_(src.to(dst.dtype()).to(dst.device()));
  }
  model.refresh_low_precision_copies();
  report.loaded = copies.size();
  return report;
}

void save_weights(const Module& model, const std::filesystem::path& path, const std::map<std::string, std::string>& metadata) {
  check_extension(path);
  if (is_safetensors(path)) {
    std::map<std::string, std::string> header = metadata;
    header["format"] = "pt";
    io::save_safetensors(path, export_state(model, WeightsLayout::torch), header);
  } else {
    io::TensorFile file;
    file.tensors = export_state(model, WeightsLayout::engine);
    for (const auto& [key, value] : metadata) file.attributes[key] = value;
    file.attributes["layout"] = std::string("nhwc");
    io::save_hdf5(path, file);
  }
}

WeightsReport load_weights(Module& model, const std::filesystem::path& path, bool only_matching_shapes) {
  check_extension(path);
  if (is_safetensors(path)) {
    const io::SafetensorsFile file = io::load_safetensors(path);
    return import_state(model, file.tensors, WeightsLayout::torch, only_matching_shapes, path.string());
  }
  const io::TensorFile file = io::load_hdf5(path);
  return import_state(model, file.tensors, WeightsLayout::engine, only_matching_shapes, path.string());
}

}  // namespace cnn
