// Inference with trained classifiers (see infer.h): ensemble members built from checkpoints or
// weights files, batches preprocessed on the host in parallel, softmax averaged over members and
// test-time views.
#include "train/infer.h"

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <sstream>

#include "data/file_dataset.h"
#include "data/transforms.h"
#include "engine/cnn.h"
#include "layers/registry.h"
#include "layers/weights.h"
#include "train/checkpoint.h"
#include "train/config/config.h"
#include "train/eval_support.h"
#include "train/log/json_text.h"

namespace cnn::train {

namespace {
namespace fs = std::filesystem;

// One model of the ensemble with the preprocessing of each of its views.
struct Member {
  std::string source;
  std::unique_ptr<Module> model;
  std::vector<data::Pipeline> pipelines;  // one per scale
  std::vector<std::string> class_names;
  bool named = true;  // false: the names are only numbers (a weights file without a class list)
};

// The model and pipelines a config describes; the weights are loaded by the caller.
Member member_from_config(const Config& c, std::vector<std::string> class_names, const std::string& source,
                          const InferOptions& options) {
  const int classes = static_cast<int>(c.integer("model.num_classes"));
  const int channels = static_cast<int>(c.integer("model.in_channels"));
  if (class_names.empty()) class_names = data::numbered_class_names(classes);
  CNN_CHECK(static_cast<int>(class_names.size()) == classes, source, ": ", class_names.size(),
            " class names for a model of ", classes, " classes; give one name per class");
  Member m;
  m.source = source;
  m.model = make_model(c.text("model.name"), classes, channels, 0);
  for (double factor : kMultiscaleFactors) {
    m.pipelines.push_back(eval_pipeline(c, channels, factor));
    if (!options.tta_multiscale) break;
  }
  m.class_names = std::move(class_names);
  return m;
}

Member checkpoint_member(const fs::path& path, const InferOptions& options) {
  const TrainingState s = load_checkpoint(path);
  CNN_CHECK(!s.config.empty(), "checkpoint ", path.string(),
            " carries no config, so its model and preprocessing are unknown; pass it as --weights with --model");
  Member m = member_from_config(Config::parse(s.config, path.string()), s.class_names, path.string(), options);
  restore_tensors(s.params, as_named(m.model->named_parameters()), path.string());
  restore_tensors(s.buffers, as_named(m.model->named_buffers()), path.string());
  return m;
}

std::vector<std::string> read_class_names(const fs::path& path) {
  std::ifstream in(path);
  CNN_CHECK(in.good(), "cannot open the class names file ", path.string(), "; it should hold one class name per line");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  CNN_CHECK(!names.empty(), "the class names file ", path.string(), " is empty; it should hold one class name per line");
  return names;
}

Member weights_member(const WeightsModel& w, const InferOptions& options) {
  CNN_CHECK(!w.model.empty(), "weights ", w.weights.string(), " need a model name (--model; see cnn_summary --list)");
  std::vector<std::string> names;
  if (!w.class_names_file.empty()) names = read_class_names(w.class_names_file);
  const int classes = w.num_classes > 0 ? w.num_classes : static_cast<int>(names.size());
  CNN_CHECK(classes > 0, "weights ", w.weights.string(), " need the number of classes (--classes) or a class names file");
  Config c;
  c.apply_override("model.name=" + w.model);
  c.apply_override("model.num_classes=" + std::to_string(classes));
  c.apply_override("model.in_channels=" + std::to_string(w.in_channels));
  c.apply_override("data.image_size=" + std::to_string(w.image_size));
  std::ostringstream crop;
  crop << std::setprecision(17) << w.crop_pct;
  c.apply_override("data.crop_pct=" + crop.str());
  const auto list = [](const std::vector<double>& values) {
    std::ostringstream text;
    text << std::setprecision(17);
    for (size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
    return text.str();
  };
  for (const auto& [option, values] : {std::pair{"mean", &w.mean}, std::pair{"std", &w.std}})
    CNN_CHECK(values->size() <= 1 || static_cast<int>(values->size()) == w.in_channels, "weights ", w.weights.string(),
              ": --", option, " has ", values->size(), " values but the model takes ", w.in_channels,
              " input channels; give one value per channel, or one for all");
  if (!w.mean.empty()) c.apply_override("data.mean=" + list(w.mean));
  else if (w.in_channels == 1) c.apply_override("data.mean=0.5");
  if (!w.std.empty()) c.apply_override("data.std=" + list(w.std));
  else if (w.in_channels == 1) c.apply_override("data.std=0.5");
  const bool named = !names.empty();
  Member m = member_from_config(c, std::move(names), w.class_names_file.empty() ? w.weights.string() : w.class_names_file.string(),
                                options);
  m.source = w.weights.string();
  m.named = named;
  load_weights(*m.model, w.weights);  // strict: any missing or mismatched tensor is an error
  return m;
}

// Every member must predict the same classes; names count where a member has names of its own.
void check_same_classes(const std::vector<Member>& members) {
  for (const Member& m : members) {
    const Member& first = members.front();
    CNN_CHECK(m.class_names.size() == first.class_names.size(), "ensemble members disagree on the number of classes: ",
              first.source, " has ", first.class_names.size(), ", ", m.source, " has ", m.class_names.size(),
              "; ensemble only models of the same classes");
    CNN_CHECK(!m.named || !first.named || m.class_names == first.class_names, "ensemble members disagree on the classes: ",
              first.source, " and ", m.source, " name them differently; ensemble only models of the same classes");
  }
}

// [n, H, W, C] on the host, mirrored left to right.
Tensor flip_horizontal(const Tensor& x) {
  const int64_t n = x.size(0), h = x.size(1), w = x.size(2), c = x.size(3);
  Tensor out = Tensor::empty(x.shape(), DType::f32);
  const float* src = x.data_as<float>();
  float* dst = out.data_as<float>();
  for (int64_t row = 0; row < n * h; ++row)
    for (int64_t col = 0; col < w; ++col)
      std::copy_n(src + (row * w + (w - 1 - col)) * c, c, dst + (row * w + col) * c);
  return out;
}

// Adds the softmax of the model's logits on x to sums[rows[r]].
void add_probabilities(Module& model, const Tensor& x, const Device& device, const std::vector<size_t>& rows,
                       std::vector<std::vector<double>>& sums) {
  NoGrad no_grad;
  const std::vector<double> p = softmax(model.forward(x.to(device)).to(DType::f32)).to(Device::cpu()).to_doubles();
  const size_t classes = p.size() / rows.size();
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<double>& sum = sums[rows[r]];
    CNN_CHECK(sum.size() == classes, "the model gave ", classes, " outputs per image where ", sum.size(),
              " classes were expected");
    for (size_t k = 0; k < classes; ++k) sum[k] += p[r * classes + k];
  }
}

std::vector<int64_t> top_classes(const std::vector<double>& p, int topk) {
  std::vector<int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min(order.size(), static_cast<size_t>(std::max(topk, 1)));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), [&](int64_t a, int64_t b) {
    return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] || (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
  });
  order.resize(k);
  return order;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}
}  // namespace

std::vector<std::string> collect_images(const std::vector<std::string>& inputs, const std::function<void(const std::string&)>& warn) {
  std::vector<std::string> images;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {
      images.push_back(input);  // a file as given: an unreadable one is reported when it is loaded
      continue;
    }
    const std::vector<std::string> found = data::find_image_files(input, warn);
    CNN_CHECK(!found.empty(), "the folder ", input, " holds no image files (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm); ",
              "name image files or folders that hold some");
    images.insert(images.end(), found.begin(), found.end());
  }
  return images;
}

InferResult run_inference(const std::vector<std::string>& images, const InferOptions& options) {
  CNN_CHECK(!images.empty(), "no images to classify; name image files or folders");
  CNN_CHECK(!options.checkpoints.empty() || !options.weights_models.empty(),
            "no model to run; give a checkpoint (--checkpoint) or weights with --model");
  CNN_CHECK(options.batch_size > 0, "the batch size must be positive, not ", options.batch_size);
  CNN_CHECK(options.topk > 0, "--topk must be positive, not ", options.topk);
  if (options.device.is_cuda()) cuda::require_device(options.device.index);
  const auto warn = options.warn ? options.warn : [](const std::string& m) { std::cerr << "cnn_infer: warning: " << m << "\n"; };

  std::vector<Member> members;
  for (const fs::path& path : options.checkpoints) members.push_back(checkpoint_member(path, options));
  for (const WeightsModel& w : options.weights_models) members.push_back(weights_member(w, options));
  check_same_classes(members);
  for (Member& m : members) {
    m.model->to(options.device);
    m.model->eval();
  }
  InferResult result;
  const auto named = std::find_if(members.begin(), members.end(), [](const Member& m) { return m.named; });
  result.class_names = (named != members.end() ? *named : members.front()).class_names;
  const size_t classes = result.class_names.size();

  std::vector<data::FileDataset::Entry> entries;
  for (const std::string& path : images) entries.push_back({path, 0});
  const data::FileDataset files(std::move(entries), {"image"}, "the input images");
  const int64_t total = files.size();
  for (int64_t start = 0; start < total; start += options.batch_size) {
    const int64_t n = std::min(options.batch_size, total - start);
    std::vector<std::vector<double>> sums(static_cast<size_t>(n), std::vector<double>(classes, 0.0));
    std::vector<char> unreadable(static_cast<size_t>(n), 0);
    int views = 0;
    for (Member& m : members) {
      for (const data::Pipeline& pipeline : m.pipelines) {
        std::vector<data::Image> prepared(static_cast<size_t>(n));
        std::vector<std::string> corrupt(static_cast<size_t>(n)), failed(static_cast<size_t>(n));
#pragma omp parallel for schedule(dynamic)
        for (int64_t i = 0; i < n; ++i) {
          const auto slot = static_cast<size_t>(i);
          if (unreadable[slot]) continue;
          const int64_t index = start + i;
          try {
            prepared[slot] = pipeline.run(files.load(index, pipeline.decode_options()), 0, 0, static_cast<uint64_t>(index),
                                          files.source(index));
          } catch (const data::CorruptImageError& e) {
            corrupt[slot] = e.what();
          } catch (const std::exception& e) {
            failed[slot] = e.what();
          }
        }
        std::vector<size_t> rows;
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
          // One file that cannot be prepared (unreadable, or an error of its own) is named and
          // skipped; the other images of the batch go on.
          if (!corrupt[i].empty() || !failed[i].empty()) {
            warn(!corrupt[i].empty() ? "skipped an unreadable image: " + corrupt[i]
                                     : "skipped " + files.source(start + static_cast<int64_t>(i)) + ": " + failed[i]);
            unreadable[i] = 1;
            ++result.unreadable;
          }
          if (!unreadable[i]) rows.push_back(i);
        }
        ++views;
        if (rows.empty()) continue;
        const int64_t h = pipeline.height(), w = pipeline.width(), c = pipeline.channels();
        Tensor x = Tensor::empty({static_cast<int64_t>(rows.size()), h, w, c}, DType::f32);
        for (size_t r = 0; r < rows.size(); ++r)
          data::write_sample(prepared[rows[r]], pipeline.normalize(), DType::f32,
                             x.data_as<float>() + static_cast<int64_t>(r) * h * w * c);
        add_probabilities(*m.model, x, options.device, rows, sums);
        if (options.tta_flip) {
          add_probabilities(*m.model, flip_horizontal(x), options.device, rows, sums);
          ++views;
        }
      }
    }
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      if (unreadable[i]) continue;
      Prediction p;
      p.path = files.source(start + static_cast<int64_t>(i));
      p.probabilities = std::move(sums[i]);
      for (double& v : p.probabilities) v /= views;
      p.top = top_classes(p.probabilities, options.topk);
      result.predictions.push_back(std::move(p));
    }
  }
  return result;
}

OutputFormat parse_output_format(const std::string& text) {
  if (text == "text") return OutputFormat::text;
  if (text == "csv") return OutputFormat::csv;
  if (text == "json") return OutputFormat::json;
  throw Error("unknown output format '" + text + "'; use text, csv or json");
}

void write_predictions(std::ostream& out, const InferResult& result, OutputFormat format) {
  const auto name = [&](int64_t k) -> const std::string& { return result.class_names[static_cast<size_t>(k)]; };
  const auto probability = [](const Prediction& p, int64_t k) { return p.probabilities[static_cast<size_t>(k)]; };
  if (format == OutputFormat::json) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::array();
    for (const Prediction& p : result.predictions) {
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (size_t r = 0; r < p.top.size(); ++r)
        top.push_back({{"rank", r + 1}, {"class", name(p.top[r])}, {"index", p.top[r]}, {"probability", probability(p, p.top[r])}});
      doc.push_back({{"path", p.path}, {"predictions", top}});
    }
    out << json_text(doc, 2) << "\n";
    return;
  }
  if (format == OutputFormat::csv) out << "path,rank,class,probability\n";
  const std::ios::fmtflags flags = out.flags();
  const std::streamsize precision = out.precision();
  for (const Prediction& p : result.predictions) {
    if (format == OutputFormat::text) out << p.path << "\n";
    for (size_t r = 0; r < p.top.size(); ++r) {
      if (format == OutputFormat::text)
        out << "  " << std::fixed << std::setprecision(4) << probability(p, p.top[r]) << "  " << name(p.top[r]) << "\n";
      else
        out << csv_field(p.path) << "," << r + 1 << "," << csv_field(name(p.top[r])) << "," << std::setprecision(8)
            << std::defaultfloat << probability(p, p.top[r]) << "\n";
    }
  }
  out.flags(flags);
  out.precision(precision);
}

}  // namespace cnn::train
