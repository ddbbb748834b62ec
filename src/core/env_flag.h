// An on/off switch read from the environment (MSA_FORCE_SCALAR, MSA_NO_AVX512, MSA_PIN_THREADS).
#pragma once

#include <cstdlib>
#include <cstring>

namespace msa {

// Whether environment variable `name` is set to anything but "0".
inline bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && std::strcmp(v, "0") != 0;
}

}  // namespace msa
