// JSON text for the run's record files (confusion.json, metrics.jsonl, predictions): a JSON writer
// throws on strings that are not UTF-8, and class and file names are bytes from the file system.
// Such strings are written with their stray bytes spelled \xHH (engine/io/utf8_text.h), so that a
// name can never stop a run or lose a checkpoint.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/utf8_text.h"

namespace cnn::train {

// A copy of `doc` whose strings (values and object keys) all went through io::printable_utf8.
template <typename Json>
Json with_printable_strings(const Json& doc) {
  if (doc.is_string()) return Json(io::printable_utf8(doc.template get_ref<const typename Json::string_t&>()));
  if (doc.is_array()) {
    Json out = Json::array();
    for (const auto& item : doc) out.push_back(with_printable_strings(item));
    return out;
  }
  if (doc.is_object()) {
    Json out = Json::object();
    for (auto it = doc.begin(); it != doc.end(); ++it) out[io::printable_utf8(it.key())] = with_printable_strings(it.value());
    return out;
  }
  return doc;
}

// The JSON text of `doc` (nlohmann::json or ordered_json; indent as in dump()). Never throws for
// bytes that are not UTF-8: the strings are made printable first.
template <typename Json>
std::string json_text(const Json& doc, int indent = -1) {
  try {
    return doc.dump(indent);
  } catch (const nlohmann::json::type_error&) {  // 316: a string that is not UTF-8
    return with_printable_strings(doc).dump(indent);
  }
}

}  // namespace cnn::train
