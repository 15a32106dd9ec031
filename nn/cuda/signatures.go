package cuda

import (
	_ "embed"
	"fmt"
	"strings"
)

// ptx is kernels.cu as nvcc compiled it (`make ptx`), what a GPU's driver
// loads. It is embedded in every build: the kernels' parameters are read
// from it, so that a launch is checked against what the GPU will run.
//
//go:embed kernels.ptx
var ptx string

// signature is a kernel's parameters, a letter each as kernelArgs takes
// them (p a pointer, i an int, f a float, d a double), and whether its
// threads meet at barriers or warp shuffles.
type signature struct {
	params string
	sync   bool
}

// kernelSignatures are kernels.ptx's kernels by name, or why they could
// not be read (which TestPTXSignatures keeps from happening).
var kernelSignatures, errSignatures = ptxSignatures(ptx)

// ptxKinds are the PTX parameter types kernelArgs passes, as its letters.
var ptxKinds = map[string]byte{".u64": 'p', ".u32": 'i', ".s32": 'i', ".f32": 'f', ".f64": 'd'}

// ptxSignatures reads every .entry of a PTX module: its parameters' types
// and whether its body synchronises (bar.sync, barrier.sync, shfl.sync).
// distrl's kernels take no 64-bit integers, so .u64 is a pointer.
func ptxSignatures(src string) (map[string]signature, error) {
	sigs := map[string]signature{}
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		rest, ok := strings.CutPrefix(line, ".visible .entry ")
		if !ok {
			continue
		}
		name, ok := strings.CutSuffix(rest, "(")
		if !ok {
			return nil, fmt.Errorf("cuda: kernels.ptx line %d: an entry without its parameters: %q", i+1, line)
		}
		var sig signature
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
			f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(lines[i]), ","))
			if len(f) != 3 || f[0] != ".param" {
				return nil, fmt.Errorf("cuda: kernels.ptx line %d: %s: a parameter PTX says otherwise than .param .type name: %q", i+1, name, lines[i])
			}
			kind, ok := ptxKinds[f[1]]
			if !ok {
				return nil, fmt.Errorf("cuda: kernels.ptx line %d: %s: a parameter of type %s, which kernelArgs cannot pass", i+1, name, f[1])
			}
			sig.params += string(kind)
		}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], ".visible .entry "); i++ {
			l := lines[i]
			if strings.Contains(l, "bar.sync") || strings.Contains(l, "barrier.sync") || strings.Contains(l, "shfl.sync") {
				sig.sync = true
			}
		}
		i-- // the next entry's line
		if _, dup := sigs[name]; dup {
			return nil, fmt.Errorf("cuda: kernels.ptx: kernel %s twice", name)
		}
		sigs[name] = sig
	}
	if len(sigs) == 0 {
		return nil, fmt.Errorf("cuda: kernels.ptx has no kernels")
	}
	return sigs, nil
}
