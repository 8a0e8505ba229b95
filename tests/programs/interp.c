/*
 * interp.c — a small bytecode interpreter (register VM, switch dispatch).
 *
 * Control-flow features exercised:
 *   - the VM's dispatch `switch` over 18 opcodes compiles to a jump table
 *     with an indirect `jr` executed once per bytecode instruction — the
 *     classic hard case for indirect-branch prediction and for trace
 *     compression (the target sequence follows the bytecode program),
 *   - data-dependent conditional branches inside the handlers,
 *   - VM-level CALL/RET implemented with an explicit VM stack.
 * The bytecode program (assembled at start-up, with labels patched) runs a
 * sieve of Eratosthenes up to 300 and an iterative Fibonacci subroutine, and
 * repeats that ITERS times.
 *
 * Usage: interp [ITERS]   (decimal, default 7)
 *
 * Work scales linearly with ITERS: about 9,700 + 133,350 * ITERS retired
 * instructions. Measured with qemu-riscv64 7.2 -singlestep -d nochain,exec
 * (one log line per retired instruction; empty environment, binary at
 * /tmp/tp/interp — see tests/programs/README.md):
 *   ITERS=1       143,073
 *   ITERS=7       943,228   (default: ~1 M, for tests)
 *   ITERS=100  13,345,489
 *   ITERS=250  33,349,065   (decode-speed benchmark: >= 30 M; the exec log
 *                            is 2.7 GB and takes ~75 s to write)
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

enum op {
    OP_HALT, OP_LI, OP_MOV, OP_ADD, OP_ADDI, OP_SUB, OP_MUL, OP_XOR, OP_SHR,
    OP_LT, OP_LD, OP_ST, OP_BEQZ, OP_BNEZ, OP_JMP, OP_CALL, OP_RET, OP_NOP,
};

struct insn { unsigned char op, a, b, c; int imm; };

#define MAXCODE 128
#define MEMSZ 512
#define NREGS 8

static struct insn code[MAXCODE];
static int ncode;

static int emit(enum op op, int a, int b, int c, int imm)
{
    code[ncode] = (struct insn){ (unsigned char)op, (unsigned char)a,
                                 (unsigned char)b, (unsigned char)c, imm };
    return ncode++;
}
static void patch(int at, int target) { code[at].imm = target; }

/* Registers: r0 = 0 by convention (never written), r1..r7 general. */
static void assemble(int iters)
{
    enum { N = 300, FIBN = 40 };
    /* r7 = iteration counter, r6 = accumulator */
    emit(OP_LI, 7, 0, 0, iters);
    emit(OP_LI, 6, 0, 0, 0);
    int outer = emit(OP_NOP, 0, 0, 0, 0);
    int exit_branch = emit(OP_BEQZ, 7, 0, 0, -1);

    /* sieve: mem[i] = 1 for i in 2..N */
    emit(OP_LI, 1, 0, 0, 2);               /* r1 = i */
    emit(OP_LI, 3, 0, 0, N + 1);           /* r3 = N+1 */
    emit(OP_LI, 4, 0, 0, 1);               /* r4 = 1 */
    int fill = emit(OP_ST, 0, 1, 4, 0);    /* mem[r1] = r4 */
    emit(OP_ADDI, 1, 1, 0, 1);
    emit(OP_LT, 2, 1, 3, 0);               /* r2 = i < N+1 */
    emit(OP_BNEZ, 2, 0, 0, fill);

    /* for i = 2; i*i <= N; i++ */
    emit(OP_LI, 1, 0, 0, 2);
    int cross_outer = emit(OP_MUL, 2, 1, 1, 0);      /* r2 = i*i */
    emit(OP_LT, 5, 2, 3, 0);                         /* r5 = i*i < N+1 */
    int cross_done = emit(OP_BEQZ, 5, 0, 0, -1);
    emit(OP_LD, 5, 1, 0, 0);                         /* r5 = mem[i] */
    int not_prime = emit(OP_BEQZ, 5, 0, 0, -1);
    int cross_inner = emit(OP_ST, 0, 2, 0, 0);       /* mem[j] = r0 (0) */
    emit(OP_ADD, 2, 2, 1, 0);                        /* j += i */
    emit(OP_LT, 5, 2, 3, 0);
    emit(OP_BNEZ, 5, 0, 0, cross_inner);
    int next_i = emit(OP_ADDI, 1, 1, 0, 1);
    emit(OP_JMP, 0, 0, 0, cross_outer);
    patch(not_prime, next_i);

    /* count primes: r4 = count */
    int count_start = emit(OP_LI, 1, 0, 0, 2);
    patch(cross_done, count_start);
    emit(OP_LI, 4, 0, 0, 0);
    int count_loop = emit(OP_LD, 5, 1, 0, 0);
    emit(OP_ADD, 4, 4, 5, 0);
    emit(OP_ADDI, 1, 1, 0, 1);
    emit(OP_LT, 5, 1, 3, 0);
    emit(OP_BNEZ, 5, 0, 0, count_loop);
    emit(OP_ADD, 6, 6, 4, 0);                        /* acc += count */

    /* acc ^= fib(FIBN) via a VM subroutine (argument in r1, result in r2) */
    emit(OP_LI, 1, 0, 0, FIBN);
    int call = emit(OP_CALL, 0, 0, 0, -1);
    emit(OP_XOR, 6, 6, 2, 0);
    emit(OP_SHR, 5, 6, 0, 7);
    emit(OP_ADD, 6, 6, 5, 0);                        /* acc += acc >> 7 */
    emit(OP_ADDI, 7, 7, 0, -1);
    emit(OP_JMP, 0, 0, 0, outer);

    int done = emit(OP_HALT, 0, 0, 0, 0);
    patch(exit_branch, done);

    /* fib subroutine: r2 = fib(r1), clobbers r3, r4, r5 */
    int fib = emit(OP_LI, 2, 0, 0, 0);
    patch(call, fib);
    emit(OP_LI, 3, 0, 0, 1);
    int fib_loop = emit(OP_BEQZ, 1, 0, 0, -1);
    int fib_body = emit(OP_ADD, 4, 2, 3, 0);
    emit(OP_MOV, 2, 3, 0, 0);
    emit(OP_MOV, 3, 4, 0, 0);
    emit(OP_ADDI, 1, 1, 0, -1);
    emit(OP_JMP, 0, 0, 0, fib_loop);
    int fib_ret = emit(OP_RET, 0, 0, 0, 0);
    patch(fib_loop, fib_ret);
    (void)fib_body;
}

static NOINLINE unsigned long run(void)
{
    long r[NREGS] = { 0 };
    long mem[MEMSZ] = { 0 };
    int stack[16];
    int sp = 0;
    int pc = 0;
    unsigned long executed = 0;

    for (;;) {
        const struct insn *i = &code[pc++];
        executed++;
        switch (i->op) {
        case OP_HALT: return (unsigned long)r[6] ^ (executed << 32);
        case OP_LI:   r[i->a] = i->imm; break;
        case OP_MOV:  r[i->a] = r[i->b]; break;
        case OP_ADD:  r[i->a] = r[i->b] + r[i->c]; break;
        case OP_ADDI: r[i->a] = r[i->b] + i->imm; break;
        case OP_SUB:  r[i->a] = r[i->b] - r[i->c]; break;
        case OP_MUL:  r[i->a] = r[i->b] * r[i->c]; break;
        case OP_XOR:  r[i->a] = r[i->b] ^ r[i->c]; break;
        case OP_SHR:  r[i->a] = (long)((unsigned long)r[i->b] >> i->imm); break;
        case OP_LT:   r[i->a] = r[i->b] < r[i->c]; break;
        case OP_LD:   r[i->a] = mem[(unsigned long)r[i->b] % MEMSZ]; break;
        case OP_ST:   mem[(unsigned long)r[i->b] % MEMSZ] = r[i->c]; break;
        case OP_BEQZ: if (r[i->a] == 0) pc = i->imm; break;
        case OP_BNEZ: if (r[i->a] != 0) pc = i->imm; break;
        case OP_JMP:  pc = i->imm; break;
        case OP_CALL: if (sp >= 16) return ~0UL; stack[sp++] = pc; pc = i->imm; break;
        case OP_RET:  if (sp <= 0) return ~0UL; pc = stack[--sp]; break;
        case OP_NOP:  break;
        default:      return ~0UL;
        }
    }
}

int main(int argc, char **argv)
{
    int iters = 7;
    if (argc > 1) {
        iters = 0;
        for (const char *p = argv[1]; *p; p++) {
            if (*p < '0' || *p > '9' || iters > 100000000) {
                fprintf(stderr, "usage: interp [ITERS]\n");
                return 2;
            }
            iters = iters * 10 + (*p - '0');
        }
    }
    assemble(iters);
    unsigned long result = run();
    printf("interp: iters=%d result=%lu vm_insns=%lu\n", iters, result & 0xffffffffUL,
           result >> 32);
    return 0;
}
