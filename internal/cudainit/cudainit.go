//go:build cuda

package cudainit

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
import "C"

// Only fmt and os: both are imports of gorgonia.org/cu, so nothing this
// package needs can hold its init back behind cu's (see the package doc).
import (
	"fmt"
	"os"
)

func init() {
	r := C.cuInit(0)
	if r == C.CUDA_SUCCESS {
		return
	}
	var name, desc *C.char
	C.cuGetErrorName(r, &name)
	C.cuGetErrorString(r, &desc)
	msg := fmt.Sprintf("CUDA unavailable: cuInit: %s (%s)", C.GoString(desc), C.GoString(name))
	prog := os.Args[0]
	for i := len(prog) - 1; i >= 0; i-- {
		if prog[i] == '/' {
			prog = prog[i+1:]
			break
		}
	}
	if n := len(prog); n > 5 && prog[n-5:] == ".test" {
		fmt.Printf("SKIP: %s: %s; these tests need an NVIDIA GPU and its driver\n", prog, msg)
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", prog, msg)
	os.Exit(ExitUnavailable)
}
