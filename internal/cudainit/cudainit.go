//go:build cuda && !cudaemu

package cudainit

// #cgo LDFLAGS: -lcuda -ldl
// #define _GNU_SOURCE
// #include <dlfcn.h>
// #include <cuda.h>
//
// // The driver's answer to the first cuInit, and whether a failure is to be
// // hidden from gorgonia.org/cu (test binaries: see the package doc).
// static CUresult realResult = CUDA_SUCCESS;
// static int hideFailure = 0;
//
// // cuInit interposes the driver's: the executable's definition wins over
// // libcuda's for every caller in the process, gorgonia.org/cu's init
// // included, and the driver's is found with RTLD_NEXT.
// CUresult cuInit(unsigned int flags) {
// 	static CUresult (*driver)(unsigned int);
// 	if (driver == NULL) driver = (CUresult (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
// 	realResult = driver == NULL ? CUDA_ERROR_NOT_FOUND : driver(flags);
// 	return realResult != CUDA_SUCCESS && hideFailure ? CUDA_SUCCESS : realResult;
// }
// static void setHideFailure(int on) { hideFailure = on; }
// static CUresult driverResult(void) { return realResult; }
import "C"

// Only fmt and os: both are imports of gorgonia.org/cu, so nothing this
// package needs can hold its init back behind cu's (see the package doc).
import (
	"fmt"
	"os"
)

// initErr is why the driver did not initialise, in a test binary that
// goes on without it; nil where it did.
var initErr error

func init() {
	prog := os.Args[0]
	for i := len(prog) - 1; i >= 0; i-- {
		if prog[i] == '/' {
			prog = prog[i+1:]
			break
		}
	}
	test := len(prog) > 5 && prog[len(prog)-5:] == ".test"
	if test {
		C.setHideFailure(1)
	}
	C.cuInit(0)
	r := C.driverResult()
	if r == C.CUDA_SUCCESS {
		return
	}
	msg := "cuInit: the driver library has no cuInit"
	if r != C.CUDA_ERROR_NOT_FOUND {
		var name, desc *C.char
		C.cuGetErrorName(r, &name)
		C.cuGetErrorString(r, &desc)
		msg = fmt.Sprintf("cuInit: %s (%s)", C.GoString(desc), C.GoString(name))
	}
	if test {
		initErr = fmt.Errorf("CUDA unavailable: %s; this test needs an NVIDIA GPU and its driver", msg)
		return
	}
	fmt.Fprintf(os.Stderr, "%s: CUDA unavailable: %s\n", prog, msg)
	os.Exit(ExitUnavailable)
}

// Err is nil where the CUDA driver initialised. Elsewhere only a test
// binary gets this far: it is the reason its GPU tests skip with, and
// every GPU entry point refuses to start with it, since the driver's
// other calls would fail anyway (CUDA_ERROR_NOT_INITIALIZED).
func Err() error { return initErr }
