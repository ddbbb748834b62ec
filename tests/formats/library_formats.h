// The library's scalar formats behind one interface, paired with their independent models (reference_formats.h),
// so that tests can loop over every format.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/reference_formats.h"
#include "formats/scalar_formats.h"

namespace msa::test {

struct LibraryFormat {
    const FormatSpec* spec;
    float (*decode)(std::uint32_t code);
    std::uint32_t (*encode)(float x, Overflow overflow);
    std::vector<Overflow> modes;  // the overflow modes the encoder honours
};

inline RefOverflow ref_mode(Overflow overflow) {
    return overflow == Overflow::saturate ? RefOverflow::saturate : RefOverflow::ieee;
}

inline const std::vector<LibraryFormat>& library_formats() {
    static const std::vector<LibraryFormat> formats = {
        {&kRefBf16,
         [](std::uint32_t c) { return bf16_to_float(static_cast<std::uint16_t>(c)); },
         [](float x, Overflow) -> std::uint32_t { return float_to_bf16(x); },
         {Overflow::ieee}},
        {&kRefFp16,
         [](std::uint32_t c) { return fp16_to_float(static_cast<std::uint16_t>(c)); },
         [](float x, Overflow o) -> std::uint32_t { return float_to_fp16(x, o); },
         {Overflow::saturate, Overflow::ieee}},
        {&kRefE4M3,
         [](std::uint32_t c) { return e4m3_to_float(static_cast<std::uint8_t>(c)); },
         [](float x, Overflow o) -> std::uint32_t { return float_to_e4m3(x, o); },
         {Overflow::saturate, Overflow::ieee}},
        {&kRefE5M2,
         [](std::uint32_t c) { return e5m2_to_float(static_cast<std::uint8_t>(c)); },
         [](float x, Overflow o) -> std::uint32_t { return float_to_e5m2(x, o); },
         {Overflow::saturate, Overflow::ieee}},
        {&kRefE2M1,
         [](std::uint32_t c) { return e2m1_to_float(static_cast<std::uint8_t>(c)); },
         [](float x, Overflow) -> std::uint32_t { return float_to_e2m1(x); },
         {Overflow::saturate}},
    };
    return formats;
}

// What the library's encoder must return for x, from the reference model: the nearest code, with the library's
// conventions on top (E2M1 writes a zero result as code 0; NaN results keep the input's sign).
struct ExpectedCode {
    bool is_nan;
    std::uint32_t code;  // when !is_nan
};

inline ExpectedCode expected_code(const LibraryFormat& f, const Ladder& ladder, float x, Overflow overflow) {
    const auto code = ref_encode(*f.spec, ladder, x, ref_mode(overflow));
    if (f.spec == &kRefE2M1) {
        if (!code) return {false, 0};  // NaN -> 0
        return {false, *code == 0x8 ? 0u : *code};
    }
    if (!code) return {true, 0};
    return {false, *code};
}

}  // namespace msa::test
