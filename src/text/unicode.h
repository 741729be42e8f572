// The Unicode facts the text tokenizers need, answered by ICU (the Unicode
// Consortium's library, Debian's libicu): UTF-8 <-> code points, general
// categories, the White_Space property, canonical decomposition (NFD) and
// full lower-case mapping. No Unicode tables of our own.
#pragma once
#include <string>
#include <string_view>

namespace smelt::text::unicode {

/// Code points of UTF-8 `s`; each ill-formed byte sequence becomes U+FFFD.
std::u32string from_utf8(std::string_view s);
/// UTF-8 of the code points `s`.
std::string to_utf8(std::u32string_view s);

/// General category Cc, Cf, Cn, Co or Cs ("Other"; Rust's char::is_other, which
/// Hugging Face's BertNormalizer uses as its control test).
bool is_other(char32_t c);
/// General category P* (Pc, Pd, Ps, Pe, Pi, Pf, Po).
bool is_punctuation(char32_t c);
/// General category Mn (a nonspacing mark, e.g. U+0301 COMBINING ACUTE ACCENT).
bool is_nonspacing_mark(char32_t c);
/// The White_Space property (Rust's char::is_whitespace, Python's str.isspace
/// for all but a few separators).
bool is_whitespace(char32_t c);

/// Canonical decomposition (Unicode Normalization Form D).
std::u32string nfd(std::u32string_view s);
/// Full lower-case mapping of each code point on its own, without context
/// (Rust's char::to_lowercase: U+0130 -> "i\u0307", U+03A3 -> U+03C3 always).
std::u32string to_lower(std::u32string_view s);

}  // namespace smelt::text::unicode
