// math_constants.h for the host emulator (package emu): the constants of CUDA's header that kernels.cu uses.
#pragma once
#define CUDART_INF __builtin_inf()
#define CUDART_NAN_F __builtin_nanf("")
