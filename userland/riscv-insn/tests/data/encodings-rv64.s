.option norvc
start:
lui a0, 0x12345
lui t6, 0xfffff
lui s1, 0x80000
auipc a1, 0x1
auipc ra, 0xfffff
jal ra, start
jal zero, forward
jal t0, start
jal a2, forward
jalr zero, 0(ra)
jalr zero, 0(t0)
jalr zero, 16(a5)
jalr ra, -8(a5)
jalr t0, 0(a3)
jalr ra, 0(t0)
jalr t0, 0(ra)
jalr ra, 0(ra)
jalr t0, 0(t0)
jalr a0, 4(ra)
jalr a0, 4(t0)
jalr a0, 4(a1)
beq a0, a1, start
bne a0, zero, forward
blt t0, t1, start
bge s0, s1, forward
bltu a2, a3, start
bgeu a4, a5, forward
lb a0, -1(sp)
lh a1, 2(a0)
lw a2, -2048(a1)
ld a3, 2047(a2)
lbu a4, 0(a3)
lhu a5, 6(a4)
lwu a6, 8(a5)
sb a0, -1(sp)
sh a1, 2(a0)
sw a2, -2048(a1)
sd a3, 2047(a2)
addi a0, a1, -5
slti a0, a1, 7
sltiu a0, a1, 7
xori a0, a1, -1
ori a0, a1, 0x7ff
andi a0, a1, 0xff
slli a0, a1, 63
srli a0, a1, 33
srai a0, a1, 1
add a0, a1, a2
sub a0, a1, a2
sll a0, a1, a2
slt a0, a1, a2
sltu a0, a1, a2
xor a0, a1, a2
srl a0, a1, a2
sra a0, a1, a2
or a0, a1, a2
and a0, a1, a2
addiw a0, a1, -3
slliw a0, a1, 31
srliw a0, a1, 5
sraiw a0, a1, 7
addw a0, a1, a2
subw a0, a1, a2
sllw a0, a1, a2
srlw a0, a1, a2
sraw a0, a1, a2
fence
fence rw, w
fence.tso
fence.i
ecall
ebreak
csrrw a0, mstatus, a1
csrrs a0, fflags, zero
csrrc a0, 0x7c0, a1
csrrwi a0, frm, 3
csrrsi zero, mstatus, 8
csrrci a0, sstatus, 31
mul a0, a1, a2
mulh a0, a1, a2
mulhsu a0, a1, a2
mulhu a0, a1, a2
div a0, a1, a2
divu a0, a1, a2
rem a0, a1, a2
remu a0, a1, a2
mulw a0, a1, a2
divw a0, a1, a2
divuw a0, a1, a2
remw a0, a1, a2
remuw a0, a1, a2
lr.w a0, (a1)
sc.w a0, a2, (a1)
amoswap.w a0, a2, (a1)
amoadd.w.aq a0, a2, (a1)
amoxor.w.rl a0, a2, (a1)
amoand.w.aqrl a0, a2, (a1)
amoor.w a0, a2, (a1)
amomin.w a0, a2, (a1)
amomax.w a0, a2, (a1)
amominu.w a0, a2, (a1)
amomaxu.w a0, a2, (a1)
lr.d.aq a0, (a1)
sc.d.rl a0, a2, (a1)
amoswap.d a0, a2, (a1)
amoadd.d a0, a2, (a1)
amoxor.d a0, a2, (a1)
amoand.d a0, a2, (a1)
amoor.d a0, a2, (a1)
amomin.d a0, a2, (a1)
amomax.d a0, a2, (a1)
amominu.d a0, a2, (a1)
amomaxu.d a0, a2, (a1)
flw fa0, 4(a0)
fsw fa1, -4(a0)
fld fa2, 8(sp)
fsd fa3, -8(sp)
fmadd.s fa0, fa1, fa2, fa3
fmsub.s fa0, fa1, fa2, fa3, rtz
fnmsub.s fa0, fa1, fa2, fa3
fnmadd.s fa0, fa1, fa2, fa3
fadd.s fa0, fa1, fa2
fsub.s fa0, fa1, fa2, rne
fmul.s fa0, fa1, fa2
fdiv.s fa0, fa1, fa2
fsqrt.s fa0, fa1
fsgnj.s fa0, fa1, fa2
fsgnjn.s fa0, fa1, fa2
fsgnjx.s fa0, fa1, fa2
fmin.s fa0, fa1, fa2
fmax.s fa0, fa1, fa2
fcvt.w.s a0, fa1, rtz
fcvt.wu.s a0, fa1
fmv.x.w a0, fa1
feq.s a0, fa1, fa2
flt.s a0, fa1, fa2
fle.s a0, fa1, fa2
fclass.s a0, fa1
fcvt.s.w fa0, a1
fcvt.s.wu fa0, a1
fmv.w.x fa0, a1
fcvt.l.s a0, fa1
fcvt.lu.s a0, fa1
fcvt.s.l fa0, a1
fcvt.s.lu fa0, a1
fmadd.d fa0, fa1, fa2, fa3
fmsub.d fa0, fa1, fa2, fa3
fnmsub.d fa0, fa1, fa2, fa3
fnmadd.d fa0, fa1, fa2, fa3, rup
fadd.d fa0, fa1, fa2
fsub.d fa0, fa1, fa2
fmul.d fa0, fa1, fa2
fdiv.d fa0, fa1, fa2
fsqrt.d fa0, fa1
fsgnj.d fa0, fa1, fa2
fsgnjn.d fa0, fa1, fa2
fsgnjx.d fa0, fa1, fa2
fmin.d fa0, fa1, fa2
fmax.d fa0, fa1, fa2
fcvt.s.d fa0, fa1
fcvt.d.s fa0, fa1
feq.d a0, fa1, fa2
flt.d a0, fa1, fa2
fle.d a0, fa1, fa2
fclass.d a0, fa1
fcvt.w.d a0, fa1
fcvt.wu.d a0, fa1
fcvt.d.w fa0, a1
fcvt.d.wu fa0, a1
fcvt.l.d a0, fa1, rdn
fcvt.lu.d a0, fa1
fmv.x.d a0, fa1
fcvt.d.l fa0, a1
fcvt.d.lu fa0, a1
fmv.d.x fa0, a1
mret
sret
wfi
sfence.vma
sfence.vma a0, a1
sinval.vma a0, a1
sfence.w.inval
sfence.inval.ir
hfence.vvma a0, a1
hfence.gvma a0, zero
hinval.vvma a0, a1
hinval.gvma a0, a1
hlv.b a0, (a1)
hlv.bu a0, (a1)
hlv.h a0, (a1)
hlv.hu a0, (a1)
hlvx.hu a0, (a1)
hlv.w a0, (a1)
hlvx.wu a0, (a1)
hlv.wu a0, (a1)
hlv.d a0, (a1)
hsv.b a0, (a1)
hsv.h a0, (a1)
hsv.w a0, (a1)
hsv.d a0, (a1)
dret
.insn 0x70200073
.insn 0x00200073
forward:
.option rvc
c.addi4spn a0, sp, 16
c.fld fa0, 8(a1)
c.lw a2, 4(a3)
c.ld a4, 16(a5)
c.fsd fa1, 8(a1)
c.sw a2, 4(a3)
c.sd a4, 16(a5)
c.nop
c.addi a0, -3
c.addiw a1, 5
c.li a2, -32
c.addi16sp sp, -64
c.addi16sp sp, 496
c.lui a3, 0x1f
c.lui a4, 0xfffe0
c.lui t0, 1
c.srli a0, 3
c.srai a1, 63
c.andi a2, -1
c.sub a0, a1
c.xor a0, a1
c.or a0, a1
c.and a0, a1
c.subw a0, a1
c.addw a0, a1
c.j start
c.j forward
c.beqz a0, forward
c.bnez s1, forward
c.slli a0, 12
c.fldsp fa0, 24(sp)
c.lwsp a1, 12(sp)
c.ldsp a2, 8(sp)
c.jr ra
c.jr t0
c.jr a5
c.mv a0, a1
c.ebreak
c.jalr ra
c.jalr t0
c.jalr a5
c.add a0, a1
c.fsdsp fa0, 24(sp)
c.swsp a1, 12(sp)
c.sdsp a2, 8(sp)
.insn 0x0005
