#!/usr/bin/env python3
"""Pick a few thousand lines of `objdump -d -M no-aliases` output that still exercise every
mnemonic of the whole binary, so the checked-in golden sample stays small.

Usage: select-functions.py FULL_OBJDUMP > objdump-sample.txt
"""
import re
import sys

LINE_BUDGET = 5000
ALWAYS_KEEP = {
    "main", "classify", "polynomial", "recurse", "add_numbers", "multiply_numbers",
    "divide_numbers", "_start", "memcpy", "strlen", "abort", "__libc_start_main", "setjmp",
    "__longjmp", "_setjmp", "__sigsetjmp", "__sqrt",
}
REGISTER = re.compile(r"\b(zero|ra|sp|gp|tp|t[0-6]|s[0-9]|s1[01]|a[0-7]|f[tsa][0-9]+)\b")

lines = open(sys.argv[1]).read().split("\n")
functions = []
for index, line in enumerate(lines):
    header = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
    if header:
        functions.append((header.group(1), index, [line]))
    elif functions and re.match(r"^\s+[0-9a-f]+:\t", line):
        functions[-1][2].append(line)


def features(body):
    """Mnemonics, plus mnemonic + operand shape (register class, link registers for jumps)."""
    found = set()
    for line in body[1:]:
        columns = line.split("\t")
        if len(columns) < 3:
            continue
        mnemonic = columns[2].strip()
        operands = columns[3].split("#")[0].strip() if len(columns) > 3 else ""
        keep_links = mnemonic in ("jal", "jalr", "c.jr", "c.jalr")

        def register_class(match):
            name = match.group(0)
            if keep_links and name in ("ra", "t0", "zero"):
                return name
            return "F" if name.startswith("f") else "R"

        shape = re.sub(r"0x[0-9a-f]+", "H", operands)
        shape = REGISTER.sub(register_class, shape)
        shape = re.sub(r"-?\b\d+\b", "N", shape)
        shape = re.sub(r"[0-9a-f]+ <[^>]*>", "T", shape)
        found.add(mnemonic)
        found.add(mnemonic + " " + shape)
    return found


chosen = [function for function in functions if function[0] in ALWAYS_KEEP]
remaining = [function for function in functions if function[0] not in ALWAYS_KEEP]
covered = set().union(*(features(function[2]) for function in chosen))


def greedy(wanted, budget):
    """Repeatedly add the function with the most new features per line."""
    global covered
    while remaining:
        best = max(
            remaining,
            key=lambda function: len(set(filter(wanted, features(function[2]))) - covered)
            / (len(function[2]) + 20),
        )
        remaining.remove(best)
        if not set(filter(wanted, features(best[2]))) - covered:
            break
        if sum(len(function[2]) for function in chosen) + len(best[2]) > budget:
            continue
        chosen.append(best)
        covered |= features(best[2])


greedy(lambda feature: " " not in feature, float("inf"))  # every mnemonic, whatever it costs
greedy(lambda feature: True, LINE_BUDGET)  # then operand shapes within the budget
chosen.sort(key=lambda function: function[1])
print("\n".join("\n".join(function[2]) + "\n" for function in chosen))
