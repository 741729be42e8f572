// Unicode queries through ICU (see unicode.h).
#include "text/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "smelt/error.h"

namespace smelt::text::unicode {

namespace {
icu::UnicodeString to_icu(std::u32string_view s) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()),
                                       static_cast<int32_t>(s.size()));
}

std::u32string from_icu(const icu::UnicodeString& u) {
  std::u32string out;
  out.reserve(static_cast<size_t>(u.length()));
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1))
    out.push_back(static_cast<char32_t>(u.char32At(i)));
  return out;
}
}  // namespace

std::u32string from_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto n = static_cast<int32_t>(s.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(p, i, n, c);
    out.push_back(c < 0 ? U'\uFFFD' : static_cast<char32_t>(c));
  }
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    uint8_t buf[U8_MAX_LENGTH];
    int32_t len = 0;
    UBool error = false;
    U8_APPEND(buf, len, U8_MAX_LENGTH, static_cast<UChar32>(c), error);
    if (error) {
      len = 0;
      U8_APPEND_UNSAFE(buf, len, 0xFFFD);
    }
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
  }
  return out;
}

bool is_other(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

bool is_punctuation(char32_t c) { return u_ispunct(static_cast<UChar32>(c)); }

bool is_nonspacing_mark(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool is_whitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

std::u32string nfd(std::u32string_view s) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(err);
  SMELT_CHECK(U_SUCCESS(err), "unicode::nfd: ICU has no NFD data ({})", u_errorName(err));
  icu::UnicodeString out = n->normalize(to_icu(s), err);
  SMELT_CHECK(U_SUCCESS(err), "unicode::nfd: ICU failed to normalize ({})", u_errorName(err));
  return from_icu(out);
}

std::u32string to_lower(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
      continue;
    }
    // One code point at a time: no context, so no final-sigma rule (as Rust).
    icu::UnicodeString u(static_cast<UChar32>(c));
    out += from_icu(u.toLower(icu::Locale::getRoot()));
  }
  return out;
}

}  // namespace smelt::text::unicode
