// emu.h: package emu's C interface (emu.cc), for emu.go.
#ifndef DISTRL_EMU_H
#define DISTRL_EMU_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
int emu_kernel_count(void);
const char* emu_kernel_name(int i);
const char* emu_kernel_kinds(int i);
int emu_kernel_sync(int i);
uintptr_t emu_alloc(size_t n);
int emu_free(uintptr_t p);
int emu_valid(uintptr_t p, size_t n);
int emu_htod(uintptr_t dst, const void* src, size_t n);
int emu_dtoh(void* dst, uintptr_t src, size_t n);
int emu_dtod(uintptr_t dst, uintptr_t src, size_t n);
int emu_memset32(uintptr_t dst, uint32_t v, size_t n);
int emu_launch(int k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
               const uint64_t* words, int nwords, char* err, int errlen);
#ifdef __cplusplus
}
#endif
#endif
