//go:build !noopenblas

#include <stdlib.h>
#include <string.h>
#include <strings.h>

// A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels for the CPU when it
// is loaded, by the CPU's family and model. One it does not know, as
// 0.3.21 does not know Emerald Rapids (family 6, model 207), gets the
// fallback of a CPU from 2004, Prescott (SSE3): 3.8x slower forward passes
// at batch 64 on such a machine than its own AVX-512 kernels. The library
// has no call to choose again, but it reads OPENBLAS_CORETYPE when it
// initialises its kernel table, and exports that initialisation; these
// references are weak so that an OpenBLAS built for one CPU, without them,
// still links.
extern char *openblas_get_corename(void);
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

// distrl_openblas_core_for_cpu names the OpenBLAS core whose kernels this
// CPU runs best of those a fallback can be replaced by, from its features
// (cpuid and the OS's saved vector state, as libgcc reads them), or NULL.
static const char *distrl_openblas_core_for_cpu(void) {
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl")) {
		return "SkylakeX";
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		return "Haswell";
	}
#endif
	return NULL;
}

// distrl_openblas_use_core makes OpenBLAS run the kernels of the core
// name from now on, as OPENBLAS_CORETYPE=name would have at its start, and
// leaves the environment as it was. No BLAS call may be running. It
// returns 1 when the library runs that core's kernels after.
int distrl_openblas_use_core(const char *name) {
	if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) {
		return 0;
	}
	const char *set = getenv("OPENBLAS_CORETYPE");
	char *saved = set ? strdup(set) : NULL;
	if ((set && !saved) || setenv("OPENBLAS_CORETYPE", name, 1) != 0) {
		free(saved);
		return 0;
	}
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	if (saved) {
		setenv("OPENBLAS_CORETYPE", saved, 1);
		free(saved);
	} else {
		unsetenv("OPENBLAS_CORETYPE");
	}
	const char *now = openblas_get_corename();
	return now != NULL && strcasecmp(now, name) == 0;
}

// distrl_openblas_recore replaces OpenBLAS's Prescott fallback by the core
// this CPU's features call for, unless OPENBLAS_CORETYPE chose the core.
// It must run before any BLAS call (Go runs it in an init). It returns 1
// when it chose again, 0 when it left the library's choice.
int distrl_openblas_recore(void) {
	if (getenv("OPENBLAS_CORETYPE") != NULL) {
		return 0;
	}
	const char *name = openblas_get_corename();
	const char *want = distrl_openblas_core_for_cpu();
	if (name == NULL || want == NULL || strcasecmp(name, "prescott") != 0) {
		return 0;
	}
	return distrl_openblas_use_core(want);
}
