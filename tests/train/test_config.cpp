// Training configs (train/config): parsing with defaults, typed access, every kind of refusal with
// file:line and a suggestion, --set overrides, the INI write-back, and docs/config.md being the
// schema's current reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "engine/test_io_support.h"
#include "engine/closest_match.h"
#include "train/config/config.h"
#include "train/config/schema.h"

using namespace cnn;
using namespace cnn::train;

namespace {
const char* kResnet = R"(; ResNet-50 on ImageNet
[model]
name = resnet50
num_classes = 1000

[optim]
  name = sgd          ; indented keys are fine
  lr = 0.2
  nesterov = yes
  freeze = conv1, bn1,layer1

[schedule]
name = multistep
milestones = 30, 60,80
warmup_epochs = 2.5

[train]
device = cuda:1
mixup = 0.2

[data]
path = "/data/imagenet/train"
val_path = ""
mean = 0.5, 0.5, 0.5
)";

// The refusal message for a config text (compare with doctest::Contains).
doctest::String refusal(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    Config::parse(text, "exp.ini", overrides);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}
}  // namespace

TEST_CASE("config: values from the file, defaults elsewhere, typed access and origins") {
  const Config c = Config::parse(kResnet, "resnet50.ini");
  CHECK(c.text("model.name") == "resnet50");
  CHECK(c.integer("model.num_classes") == 1000);
  CHECK(c.real("optim.lr") == 0.2);
  CHECK(c.boolean("optim.nesterov"));
  CHECK(c.texts("optim.freeze") == std::vector<std::string>{"conv1", "bn1", "layer1"});
  CHECK(c.integers("schedule.milestones") == std::vector<int64_t>{30, 60, 80});
  CHECK(c.real("schedule.warmup_epochs") == 2.5);
  CHECK(c.text("train.device") == "cuda:1");
  CHECK(c.text("data.path") == "/data/imagenet/train");
  CHECK(c.text("data.val_path").empty());
  CHECK(c.reals("data.mean") == std::vector<double>{0.5, 0.5, 0.5});
  // defaults
  CHECK(c.real("optim.momentum") == 0.9);
  CHECK(c.integer("data.batch_size") == 256);
  CHECK(c.text("precision.mode") == "fp32");
  CHECK(c.reals("data.std") == std::vector<double>{0.229, 0.224, 0.225});
  CHECK(c.texts("optim.freeze").size() == 3);
  CHECK(Config().texts("optim.freeze").empty());
  CHECK(c.origin("optim.lr") == "resnet50.ini:8");
  CHECK(c.origin("optim.momentum") == "default");
  // reading a key with the wrong type, or one that does not exist, is a programming error
  CHECK_THROWS_WITH_AS(c.integer("optim.lr"), doctest::Contains("'optim.lr' is a real key, read as int"), Error);
  CHECK_THROWS_WITH_AS(c.real("optim.lrr"), doctest::Contains("'optim.lrr' is not in the schema"), Error);
}

TEST_CASE("config: unknown sections and keys are refused with file:line and the closest name") {
  CHECK(refusal("[optim]\nlrr = 0.1\n") ==
        "config exp.ini is refused (1 problem; nothing was run):\n"
        "  exp.ini:2: unknown key 'lrr' in [optim]; did you mean 'lr'? (see docs/config.md for every key)");
  CHECK(refusal("[optimizer]\nlr = 0.1\n") == doctest::Contains("exp.ini:1: unknown section [optimizer]; did you mean [optim]?"));
  CHECK(refusal("[train]\nlr = 0.1\n") == doctest::Contains("exp.ini:2: unknown key 'lr' in [train]; it belongs in [optim] or [swa] (see"));
  CHECK(refusal("[train]\nwarmup = 3\n") == doctest::Contains("unknown key 'warmup' in [train]; it belongs in [ema] (see"));
  CHECK(refusal("[train]\nsparkle = 3\n") == doctest::Contains("unknown key 'sparkle' in [train] (see"));
  CHECK(refusal("lr = 0.1\n") == doctest::Contains("exp.ini:1: key 'lr' comes before any [section] header"));
  CHECK(refusal("[optim]\nlr 0.1\n") == doctest::Contains("exp.ini:2: 'lr 0.1' is neither a [section] header"));
  CHECK(refusal("[optim\nlr = 0.1\n") == doctest::Contains("exp.ini:1: section header '[optim' lacks its closing ']'"));
  CHECK(refusal("[optim]\nlr = 0.1\n\nlr = 0.2\n") == doctest::Contains("exp.ini:4: [optim] lr is set twice (first at line 2)"));
}

TEST_CASE("config: spaces inside a section header's brackets are trimmed, and text after the header is refused") {
  const Config c = Config::parse("[ model ]\nname = mlp\n[\ttrain ] ; comment\nepochs = 3\n", "exp.ini");
  CHECK(c.text("model.name") == "mlp");
  CHECK(c.origin("model.name") == "exp.ini:2");
  CHECK(c.integer("train.epochs") == 3);
  CHECK(refusal("[ modle ]\nname = mlp\n") == doctest::Contains("exp.ini:1: unknown section [modle]; did you mean [model]?"));
  CHECK(refusal("[model] name = mlp\n") == doctest::Contains("exp.ini:1: text after the section header's ']': 'name = mlp'"));
}

TEST_CASE("config: a UTF-8 byte-order mark at the start is skipped") {
  const Config c = Config::parse("\xEF\xBB\xBF[model]\nname = mlp\n", "exp.ini");
  CHECK(c.text("model.name") == "mlp");
  CHECK(Config::parse("\xEF\xBB\xBF; a comment first\n[train]\nepochs = 4\n", "exp.ini").integer("train.epochs") == 4);
  // only at the start: elsewhere the bytes are part of the line
  CHECK(refusal("[model]\n\xEF\xBB\xBFname = mlp\n") == doctest::Contains("exp.ini:2: unknown key"));
}

TEST_CASE("config: lines of up to 4096 characters are read and longer ones refused with file:line, comments of any length") {
  const std::string path(4089, 'x');  // "path = " + 4089: 4096 characters
  const Config c = Config::parse("; " + std::string(10000, '-') + "\n[data]\npath = " + path + "\n  # " +
                                     std::string(5000, '#') + "\n",
                                 "exp.ini");
  CHECK(c.text("data.path") == path);
  CHECK(c.origin("data.path") == "exp.ini:3");
  CHECK(refusal("[data]\npath = " + path + "y\n") ==
        doctest::Contains("exp.ini:2: the line has 4097 characters; lines may have up to 4096 (comments any number): shorten it"));
}

TEST_CASE("config: wrong types and out-of-range values are refused with key, value and range") {
  CHECK(refusal("[optim]\nmomentum = 1.5\n") == doctest::Contains("exp.ini:2: [optim] momentum = '1.5': 1.5 is outside [0, 1); allowed: a number in [0, 1)"));
  CHECK(refusal("[optim]\nlr = fast\n") == doctest::Contains("[optim] lr = 'fast': 'fast' is not a number"));
  CHECK(refusal("[optim]\nlr = 0\n") == doctest::Contains("is outside (0, 100]"));
  CHECK(refusal("[data]\nbatch_size = 12.5\n") == doctest::Contains("'12.5' is not an integer; allowed: an integer in [1, 65536]"));
  CHECK(refusal("[optim]\nname = adam\n") == doctest::Contains("[optim] name = 'adam': not one of the choices; allowed: one of sgd, adamw"));
  CHECK(refusal("[optim]\nnesterov = maybe\n") == doctest::Contains("nesterov = 'maybe': not a boolean; allowed: true or false"));
  CHECK(refusal("[train]\ndevice = gpu\n") == doctest::Contains("device = 'gpu': not a device; allowed: auto, cpu, cuda or cuda:N"));
  CHECK(refusal("[schedule]\nmilestones = 30, x, 90\n") == doctest::Contains("'x' is not an integer"));
  CHECK(refusal("[schedule]\nmilestones = 30, 0\n") == doctest::Contains("milestones = '30, 0': 0 is outside [1, 1000000]"));
  CHECK(refusal("[optim]\nfreeze = conv1,,bn1\n") == doctest::Contains("an empty name between commas"));
  // every problem at once, in line order
  const std::string all = refusal("[optim]\nlr = -1\nmomentun = 0.9\n[trian]\nepochs = 3\n").c_str();
  INFO(all);
  CHECK(all.find("(3 problems; nothing was run)") != std::string::npos);
  CHECK(all.find("exp.ini:2:") < all.find("exp.ini:3:"));
  CHECK(all.find("exp.ini:3:") < all.find("exp.ini:4:"));
  CHECK(all.find("exp.ini:3: unknown key 'momentun' in [optim]; did you mean 'momentum'") != std::string::npos);
  CHECK(all.find("exp.ini:4: unknown section [trian]; did you mean [train]") != std::string::npos);
}

TEST_CASE("config: --set overrides apply after the file and are validated the same way") {
  const Config c = Config::parse(kResnet, "resnet50.ini", {"optim.lr=0.05", "train.epochs = 3", "optim.freeze="});
  CHECK(c.real("optim.lr") == 0.05);
  CHECK(c.integer("train.epochs") == 3);
  CHECK(c.texts("optim.freeze").empty());
  CHECK(c.origin("optim.lr") == "--set");
  CHECK(refusal("", {"optim.lrr=0.1"}) == doctest::Contains("--set 'optim.lrr=0.1': unknown key 'lrr' in [optim]; did you mean 'lr'?"));
  CHECK(refusal("", {"optim.lr"}) == doctest::Contains("expected section.key=value"));
  CHECK(refusal("", {"lr=0.1"}) == doctest::Contains("expected section.key=value"));
  CHECK(refusal("", {"data.workers=-2"}) == doctest::Contains("[data] workers = '-2': -2 is outside [0, 256]"));
}

TEST_CASE("config: the resolved INI lists every key and parses back to the same config") {
  const Config c = Config::parse(kResnet, "resnet50.ini", {"precision.mode=bf16"});
  const std::string ini = c.to_ini();
  for (const KeySpec& k : config_schema()) {
    INFO(k.name());
    CHECK(ini.find("\n" + k.key + " = ") != std::string::npos);
  }
  CHECK(ini.find("\n[optim]\nname = sgd\nlr = 0.2\n") != std::string::npos);
  const Config back = Config::parse(ini, "resolved.ini");
  CHECK(back == c);
  CHECK(back.text("precision.mode") == "bf16");
  CHECK_FALSE(back == Config());
}

TEST_CASE("config: --set values survive the resolved INI, or are refused when a config file could not hold them") {
  // Surrounding spaces and quotes stay; whitespace is what inih trims (a trailing vertical tab too).
  const Config c = Config::parse("", "x.ini", {"data.path=\" spaced \"", "run.name=\"\"quoted\"\"", "model.name=resnet18\v"});
  CHECK(c.text("data.path") == " spaced ");
  CHECK(c.text("run.name") == "\"quoted\"");
  CHECK(c.text("model.name") == "resnet18");
  CHECK(Config::parse(c.to_ini(), "resolved.ini") == c);
  // A ';' after a space starts an inline comment in the file, and a line break ends the value.
  CHECK(refusal("", {"data.path=a ;b"}) == doctest::Contains("cannot be written in a config file: a ';'"));
  CHECK(refusal("", {"data.path=;b"}) == doctest::Contains("cannot be written in a config file: a ';'"));
  CHECK(refusal("", {"data.path=a\nb"}) == doctest::Contains("line break"));
  CHECK(Config::parse("", "x.ini", {"data.path=a;b"}).text("data.path") == "a;b");
}

TEST_CASE("config: loading a file reports its path, a missing file is an error") {
  const io_test::ScratchDir dir("config");
  const std::filesystem::path path = dir / "exp.ini";
  std::ofstream(path) << "[train]\nepochs = 7\nbogus = 1\n";
  CHECK_THROWS_WITH_AS(Config::load(path), doctest::Contains((path.string() + ":3: unknown key 'bogus'").c_str()), Error);
  std::ofstream(path) << "[train]\nepochs = 7\n";
  const Config c = Config::load(path);
  CHECK(c.integer("train.epochs") == 7);
  CHECK(c.source() == path.string());
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(Config::load(path), doctest::Contains("cannot be read"), Error);
  // A directory is refused (reading one gives no text, which would have meant every default),
  // naming an INI file in it when there is one.
  CHECK_THROWS_WITH_AS(Config::load(dir), doctest::Contains("is a directory, not a config file; give an INI file"), Error);
  std::ofstream(path) << "[train]\nepochs = 7\n";
  CHECK_THROWS_WITH_AS(Config::load(dir), doctest::Contains(("for example " + path.string()).c_str()), Error);
  // A byte-order mark at the start of a file (as some Windows editors write) is skipped.
  std::ofstream(path) << "\xEF\xBB\xBF[train]\nepochs = 5\n";
  CHECK(Config::load(path).integer("train.epochs") == 5);
}

TEST_CASE("config: every default is valid, and every key is documented") {
  for (const KeySpec& k : config_schema()) {
    INFO(k.name());
    CHECK(k.validate(k.default_value) == "");
    CHECK_FALSE(k.doc.empty());
    CHECK(std::count(config_sections().begin(), config_sections().end(), k.section) == 1);
  }
}

TEST_CASE("config: every numeric key has finite bounds, and a value past them is refused naming them") {
  // timeout_s = 1e10 overflowed an int64 of seconds ("did not finish within -2147483648 s"), bucket_mb
  // = 1e300 logged a negative size, and mixup = 1e308 met a hidden bound ("outside >= 0").
  for (const KeySpec& k : config_schema()) {
    const bool numeric = k.type == KeyType::integer || k.type == KeyType::real || k.type == KeyType::integer_list ||
                         k.type == KeyType::real_list;
    if (!numeric) continue;
    INFO(k.name());
    CHECK(k.range.max < 1e13);
    CHECK(k.range.min > -1e13);
    const std::string bound = k.range.str();
    CHECK(bound.front() != '>');  // ">= 0" says nothing of how large a value may be
    CHECK(k.allowed().find(bound) != std::string::npos);
    const bool integral = k.type == KeyType::integer || k.type == KeyType::integer_list;
    const std::string huge = integral ? "9223372036854775807" : "1e308";
    CHECK(k.validate(huge) == huge + " is outside " + bound);
  }
  CHECK(refusal("[distributed]\ntimeout_s = 1e10\n") == doctest::Contains("1e10 is outside (0, 604800]"));
  CHECK(refusal("[distributed]\nbucket_mb = 1e300\n") == doctest::Contains("1e300 is outside (0, 4096]"));
  CHECK(refusal("[train]\nmixup = 1e308\n") == doctest::Contains("1e308 is outside [0, 100]"));
}

TEST_CASE("config: suggestions come from edit distance") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("LR", "lr") == 0);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(closest_match("momentun", {"lr", "momentum", "nesterov"}) == "momentum");
  CHECK(closest_match("batchsize", {"batch_size", "image_size"}) == "batch_size");
  CHECK(edit_distance("trian", "train") == 1);
  CHECK(closest_match("trian", {"model", "train", "run"}) == "train");
  CHECK(closest_match("optimizer", {"optim", "schedule"}) == "optim");
  CHECK(closest_match("zzz", {"lr", "momentum"}).empty());
  CHECK(closest_match("lx", {"lr"}) == "lr");
  CHECK(closest_match("ab", {"lr"}).empty());
}

// Regenerate with: CNN_UPDATE_DOCS=1 test_train -tc='*docs/config.md*'
TEST_CASE("config: docs/config.md is the schema's current reference") {
  const std::filesystem::path path = std::filesystem::path(CNN_SOURCE_DIR) / "docs" / "config.md";
  const std::string expected = config_reference_markdown();
  if (std::getenv("CNN_UPDATE_DOCS")) std::ofstream(path) << expected;
  std::ifstream in(path);
  std::ostringstream actual;
  actual << in.rdbuf();
  INFO("docs/config.md is out of date; regenerate it with CNN_UPDATE_DOCS=1 test_train -tc='*docs/config.md*'");
  CHECK(actual.str() == expected);
}

TEST_CASE("config: optional numbers are unset by default, parsed when given, checked against their range") {
  const Config defaults;
  CHECK(!defaults.optional_real("model.dropout").has_value());
  CHECK(!defaults.optional_real("model.drop_path").has_value());
  const Config set = Config::parse("[model]\ndropout = 0.2\ndrop_path = 0\n", "m.ini");
  CHECK(set.optional_real("model.dropout") == 0.2);
  CHECK(set.optional_real("model.drop_path") == 0.0);
  CHECK_THROWS_WITH_AS(Config::parse("[model]\ndropout = 1\n", "m.ini"),
                       doctest::Contains("m.ini:2: [model] dropout = '1': 1 is outside [0, 1)"), Error);
  CHECK(Config::parse(set.to_ini(), "round-trip") == set);
  CHECK(Config::parse(defaults.to_ini(), "round-trip") == defaults);
}

// A NUL byte cut the value at it without a word ("name = resnet50\0junk" read as resnet50).
TEST_CASE("config: a NUL byte in a line is refused with its line") {
  CHECK(refusal(std::string("[model]\nname = resnet18\0junk\n", 29)) ==
        doctest::Contains("exp.ini:2: a NUL byte (\\0) in this line"));
  CHECK(refusal(std::string("[model]\nname = resnet18\n\0", 25)) == doctest::Contains("exp.ini:3: a NUL byte"));
}
