#!/usr/bin/env python3
"""Checks that AVX code in a built libsmelt runs only where the processor has it.

The eager CPU kernels are compiled once per CPU capability (src/backend/cpu/
capability.h) and picked at run time, so the library must run on a processor
without AVX: an AVX, AVX2, FMA, F16C or AVX-512 instruction may appear only in
a function of the capability copies (its name holds `cap_avx2` or
`cap_avx512`), in a SIMD variant of the math functions, which the
vectorized loops of those copies call (x86-64 vector-ABI names, `_ZGV...`),
or in smelt's own math functions of the FMA family (`smelt_vm_own_...`,
src/kernels/vector_math_impl.h), which run only where the processor has AVX2
and FMA (smelt_vm_fma), the 16-lane ones only from the AVX-512 variants, and
the AVX-512F piecewise tanh / erf (`smelt_vm_own_tanhf_n`...), called only
where the processor has AVX-512F (smelt_vm_pw).
Code the copies share with the rest of the library (template instantiations,
inline functions) must be the baseline copy, which the linker keeps when the
baseline objects come first (CMakeLists.txt orders them so). Clones the
compiler makes of a function for one caller (`[clone .constprop.0]`,
`.isra.0`, `.part.0`, `.cold`) are local to their object file, so called only
from the object they were made in: they may hold AVX code.

    python3 tools/check_cpu_isa.py build/libsmelt.so

Reads `objdump -d -C`; exits 1 listing the offending functions, 0 when clean.
Recognizes VEX/EVEX code by its mnemonics (v-prefixed) and registers (ymm,
zmm, opmask k0-k7).
"""

import re
import subprocess
import sys

ALLOWED = re.compile(r"cap_avx2|cap_avx512|^smelt_vm_own_")
FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
AVX_REG = re.compile(r"%(ymm|zmm)\d+|%k[0-7]\b")


def is_avx(instr):
    parts = instr.split(None, 1)
    if not parts:
        return False
    mnemonic = parts[0]
    if mnemonic.startswith("v") and mnemonic not in ("verr", "verw"):
        return True
    return bool(AVX_REG.search(instr))


def offending_functions(path):
    # Mangled names (no -C) say whether a symbol is a vector-ABI variant; the
    # demangled ones say which namespace a function is in.
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", path], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    mangled = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
    vector_abi = set()
    for a, b in zip(out.splitlines(), mangled.splitlines()):
        ma, mb = FUNCTION.match(a), FUNCTION.match(b)
        if ma and mb and mb.group(1).startswith("_ZGV"):
            vector_abi.add(ma.group(1))
    bad = {}
    name = None
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m:
            name = m.group(1)
            continue
        if name is None or ALLOWED.search(name) or name in vector_abi or "[clone ." in name:
            continue
        cols = line.split("\t")
        if len(cols) >= 2 and is_avx(cols[-1].strip()):
            bad.setdefault(name, cols[-1].strip())
    return bad


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bad = offending_functions(sys.argv[1])
    for name, instr in sorted(bad.items()):
        print(f"AVX outside the capability copies: {name}: {instr}")
    if bad:
        print(f"{len(bad)} function(s) would fault on a processor without AVX "
              "(see src/backend/cpu/capability.h)")
        sys.exit(1)
    print(f"{sys.argv[1]}: AVX code only in the capability copies")


if __name__ == "__main__":
    main()
