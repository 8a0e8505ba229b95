#!/bin/sh
# Regenerates the golden objdump files in this directory from their sources.
# Needs the Debian cross toolchain: gcc-riscv64-linux-gnu, binutils-riscv64-linux-gnu (2.40).
set -eu
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

riscv64-linux-gnu-as -march=rv64gch_zicsr_zifencei_svinval -o "$work/rv64.o" encodings-rv64.s
riscv64-linux-gnu-objdump -d -M no-aliases "$work/rv64.o" | tail -n +7 > encodings-rv64.txt

riscv64-linux-gnu-as -march=rv32gc_zicsr_zifencei -o "$work/rv32.o" encodings-rv32.s
riscv64-linux-gnu-objdump -d -M no-aliases "$work/rv32.o" | tail -n +7 > encodings-rv32.txt

riscv64-linux-gnu-gcc -O2 -static -march=rv64gc -mabi=lp64d sample.c -o "$work/sample" -lm
riscv64-linux-gnu-objdump -d -M no-aliases "$work/sample" > "$work/full.txt"
python3 select-functions.py "$work/full.txt" > objdump-sample.txt
