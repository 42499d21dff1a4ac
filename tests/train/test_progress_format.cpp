// The one format of a run's figures (train/log/progress_format.h): the bar, the plain line, the
// epoch fields and the end-of-run report, pinned for given figures; narrow terminals; colour and
// NO_COLOR.
#include <doctest/doctest.h>

#include <cmath>

#include <cstring>

#include "train/log/console.h"
#include "train/log/progress_format.h"

using namespace cnn::train;

namespace {
StepFigures typical() {
  StepFigures f;
  f.epoch = 2, f.epochs = 8, f.step = 100, f.steps = 234;
  f.loss = 0.351249, f.lr = 0.095, f.images_per_second = 1711.6, f.data_wait = 0.00234;
  f.elapsed_seconds = 42.4, f.epoch_eta_seconds = 56.2, f.run_eta_seconds = 511;
  return f;
}

// Printed width, not counting ANSI colour sequences.
size_t visible_length(const std::string& text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("progress format: durations, bytes, and the fields in their one order") {
  CHECK(format_duration(42.4) == "0:42");
  CHECK(format_duration(187) == "3:07");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(std::nan("")) == "?");
  CHECK(format_bytes(3.2e9) == "3.0 GiB");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_fields(typical()) == "  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  eta 0:56  run eta 8:31");
  StepFigures fp16 = typical();
  fp16.loss_scale = 65536;
  fp16.peak_memory_bytes = 5.5 * (1 << 30);
  CHECK(format_fields(fp16) ==
        "  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  scale 65536  mem 5.5 GiB  0:42  eta 0:56  run eta 8:31");
  fp16.reserved_memory_bytes = 6.0 * (1 << 30);  // what the caching allocator holds beside the peak
  CHECK(format_fields(fp16) ==
        "  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  scale 65536  mem 5.5 GiB (6.0 GiB reserved)  0:42  eta 0:56  run eta 8:31");
  StepFigures early;  // nothing known yet but the position
  early.epoch = 1, early.epochs = 8, early.step = 1, early.steps = 234;
  CHECK(format_fields(early).empty());
  CHECK(format_fields(typical(), 2) == "  loss 0.3512  lr 0.095");
}

TEST_CASE("progress format: the plain line and the bar carry the same fields") {
  CHECK(format_line(typical()) == "epoch 2/8 step 100/234  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  eta 0:56  run eta 8:31");
  CHECK(format_bar(typical(), 200, false) ==
        "epoch 2/8 [############..................] 100/234  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  eta 0:56  run eta 8:31");
  // Coloured: the filled part in green, the same text otherwise.
  const std::string coloured = format_bar(typical(), 200, true);
  CHECK(coloured.find("\033[32m############\033[0m") != std::string::npos);
  CHECK(visible_length(coloured) == format_bar(typical(), 200, false).size());
}

TEST_CASE("progress format: a narrow terminal drops fields from the end, then narrows the bar, and never wraps") {
  for (int width = 120; width >= 5; --width) {
    CAPTURE(width);
    const std::string bar = format_bar(typical(), width, true);
    CHECK(visible_length(bar) <= static_cast<size_t>(width));
  }
  CHECK(format_bar(typical(), 80, false) == "epoch 2/8 [############..................] 100/234  loss 0.3512  lr 0.095");
  CHECK(format_bar(typical(), 40, false) == "epoch 2/8 [########............] 100/234");
  CHECK(format_bar(typical(), 12, false) == "epoch 2/8 [#");
  CHECK(format_validation_bar(20, 40, 80) == "validate [##########..........] 20/40");
}

TEST_CASE("progress format: colour only on a terminal, never with NO_COLOR or TERM=dumb") {
  static const char* no_colour = nullptr;
  static const char* term = nullptr;
  const auto env = [](const char* name) -> const char* { return std::strcmp(name, "NO_COLOR") == 0 ? no_colour : term; };
  no_colour = nullptr, term = "xterm-256color";
  CHECK(use_colour(true, env));
  CHECK_FALSE(use_colour(false, env));
  no_colour = "1";
  CHECK_FALSE(use_colour(true, env));
  no_colour = "";  // set but empty does not count (no-color.org)
  CHECK(use_colour(true, env));
  term = "dumb";
  CHECK_FALSE(use_colour(true, env));
}

TEST_CASE("progress format: the end-of-run report names the best epoch, the times and the next commands") {
  RunReport r;
  r.best_top1 = 91.934, r.best_epoch = 8, r.best_loss = 0.2254, r.best_top5 = 99.85;
  r.total_seconds = 389, r.validation_seconds = 19.5, r.images_per_second = 1232.04, r.data_wait = 0.0004;
  r.steps = 1872, r.skipped_steps = 0;
  r.run_dir = "runs/20261203_121425_fashion_mnist";
  r.best_checkpoint = r.run_dir + "/best.h5", r.last_checkpoint = r.run_dir + "/last.h5";
  r.config_path = r.run_dir + "/config.ini";
  CHECK(format_run_report(r) ==
        "  best       epoch 8: top-1 91.93%, top-5 99.85%, loss 0.2254\n"
        "  time       6:29 in all: 6:10 training, 0:20 validation\n"
        "  steps      1872 optimizer steps\n"
        "  speed      1232 img/s, data wait 0.0%\n"
        "  run folder runs/20261203_121425_fashion_mnist\n"
        "  best       runs/20261203_121425_fashion_mnist/best.h5\n"
        "  last       runs/20261203_121425_fashion_mnist/last.h5\n"
        "  predict    cnn_infer --checkpoint runs/20261203_121425_fashion_mnist/best.h5 IMAGES...\n");
  r.interrupted = true;
  r.skipped_steps = 3;
  const std::string interrupted = format_run_report(r);
  CHECK(interrupted.find("  steps      1872 optimizer steps (3 skipped: inf/nan gradients)\n") != std::string::npos);
  CHECK(interrupted.find("  resume     cnn_train runs/20261203_121425_fashion_mnist/config.ini --resume "
                         "runs/20261203_121425_fashion_mnist\n") != std::string::npos);
  r.best_weights = "ema";  // best.h5 holds the EMA weights: the row says whose figures these are
  CHECK(format_run_report(r).starts_with("  best       epoch 8 (ema weights): top-1 91.93%, top-5 99.85%, loss 0.2254\n"));
  r.best_weights = "live";
  CHECK(format_run_report(r).starts_with("  best       epoch 8: top-1"));
}

TEST_CASE("progress format: the epoch line has the step fields, then validation, a cut-short epoch says where it stopped") {
  EpochLine line{.figures = typical()};
  line.figures.step = line.figures.steps = 234;
  line.figures.epoch_eta_seconds = std::nan("");
  CHECK(format_epoch_line(line) == "epoch 2/8 done  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  run eta 8:31");
  line.val_loss = 0.30137, line.val_top1 = 88.916, line.val_top5 = 99.84;
  line.corrupt_images = 3;
  CHECK(format_epoch_line(line) == "epoch 2/8 done  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42  run eta 8:31  "
                                   "3 corrupt images skipped; val loss 0.3014  top-1 88.92%  top-5 99.84%");
  line.ema_top1 = 89.104;  // [ema] on: the EMA weights' top-1 beside the live weights'
  CHECK(format_validation_figures(line) == "val loss 0.3014  top-1 88.92% (ema 89.10%)  top-5 99.84%");
  EpochLine few_classes = line;
  few_classes.val_top5 = std::nan("");  // 5 classes or fewer
  CHECK(format_validation_figures(few_classes) == "val loss 0.3014  top-1 88.92% (ema 89.10%)");
  line.val_corrupt_images = 2;
  CHECK(format_epoch_line(line).ends_with("; val loss 0.3014  top-1 88.92% (ema 89.10%)  top-5 99.84%  2 corrupt validation images skipped"));
  EpochLine cut{.figures = typical()};
  cut.figures.epoch_eta_seconds = cut.figures.run_eta_seconds = std::nan("");
  CHECK(format_epoch_line(cut) == "epoch 2/8 stopped at 100/234  loss 0.3512  lr 0.095  1712 img/s  wait 0.2%  0:42");
}
