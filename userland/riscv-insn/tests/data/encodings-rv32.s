start:
.option norvc
lui a0, 0x80000
auipc ra, 0xfffff
jal ra, start
jalr zero, 0(ra)
beq a0, a1, start
lw a2, -2048(a1)
sw a2, 4(a1)
slli a0, a1, 31
srli a0, a1, 1
srai a0, a1, 31
mul a0, a1, a2
lr.w.aqrl a0, (a1)
amomaxu.w a0, a2, (a1)
flw fa0, 4(a0)
fld fa2, 8(sp)
fcvt.w.s a0, fa1
fcvt.d.w fa0, a1
fmv.x.w a0, fa1
fmv.w.x fa0, a1
csrrs a0, cycleh, zero
csrrs a0, instret, zero
.word 0x0205d513
.word 0x02059513
.word 0x0007b503
.word 0x00c5853b
.word 0xe2058553
forward:
.option rvc
c.jal start
c.jal forward
c.flw fa0, 4(a1)
c.fsw fa0, 4(a1)
c.flwsp fa1, 12(sp)
c.fswsp fa1, 12(sp)
c.lw a0, 124(a5)
c.sw a0, 64(a5)
c.lwsp ra, 252(sp)
c.swsp ra, 252(sp)
c.fld fa0, 8(a1)
c.fldsp fa0, 504(sp)
c.fsdsp fa0, 504(sp)
c.jalr t0
c.jr ra
c.srli a0, 31
c.slli a0, 1
c.addi a0, 31
c.j start
