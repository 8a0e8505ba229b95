/*
 * switch.c — dense switch compiled to a jump table.
 *
 * Control-flow features exercised:
 *   - a 16-case dense `switch` over input bytes inside a loop; at -O2 GCC
 *     lowers it to a bounds check plus a load from a table of case addresses
 *     and an indirect `jr` (an uninferable jump whose target changes almost
 *     every iteration),
 *   - a default case reached through the bounds-check branch,
 *   - case bodies with their own conditional branches.
 * Each case does different arithmetic on the state so GCC cannot replace the
 * switch with a value lookup table. The input is a fixed byte string plus a
 * fixed linear-congruential byte stream.
 *
 * Deterministic; prints one summary line.
 */
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct state { unsigned long a, b, c; unsigned count[17]; };

static NOINLINE void step(struct state *s, unsigned char byte)
{
    switch (byte & 0x1f) {
    case 0:  s->a += byte; s->count[0]++; break;
    case 1:  s->b ^= s->a << 1; s->count[1]++; break;
    case 2:  s->c = s->c * 33 + byte; s->count[2]++; break;
    case 3:  s->a = (s->a >> 3) | (s->b << 61); s->count[3]++; break;
    case 4:  if (s->a & 1) s->b++; else s->c--; s->count[4]++; break;
    case 5:  s->b = s->b * 5 + 7; s->count[5]++; break;
    case 6:  s->c ^= 0x5a5a5a5aUL; s->count[6]++; break;
    case 7:  s->a -= s->c; s->count[7]++; break;
    case 8:  s->b = s->a + s->c; s->count[8]++; break;
    case 9:  s->c += s->b >> 2; s->count[9]++; break;
    case 10: s->a = ~s->a; s->count[10]++; break;
    case 11: if (s->b > s->c) s->b -= s->c; else s->c -= s->b; s->count[11]++; break;
    case 12: s->a *= 3; s->count[12]++; break;
    case 13: s->b |= byte; s->count[13]++; break;
    case 14: s->c &= ~(unsigned long)byte; s->count[14]++; break;
    case 15: s->a += s->b + s->c; s->count[15]++; break;
    default: s->count[16]++; break; /* 16..31 */
    }
}

static const char text[] =
    "The quick brown fox jumps over the lazy dog; PACK MY BOX WITH FIVE "
    "DOZEN LIQUOR JUGS. 0123456789 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

int main(void)
{
    struct state s;
    memset(&s, 0, sizeof s);
    size_t n = strlen(text);

    for (unsigned rep = 0; rep < 400; rep++)
        for (size_t i = 0; i < n; i++)
            step(&s, (unsigned char)text[i]);

    unsigned long lcg = 1;
    for (unsigned i = 0; i < 20000; i++) {
        lcg = lcg * 6364136223846793005UL + 1442695040888963407UL;
        step(&s, (unsigned char)(lcg >> 56));
    }

    printf("switch: a=%lu b=%lu c=%lu", s.a, s.b, s.c);
    for (unsigned i = 0; i < 17; i++)
        printf("%s%u", i ? "," : " counts=", s.count[i]);
    printf("\n");
    return 0;
}
