// Package nn implements the small neural networks that distrl's
// actor-critic learners (PPO on CartPole-sized problems and friends) use:
// a batched, float32 multilayer perceptron, optionally behind a few 2-D
// convolutions for observations that are images (MinAtar's), with a policy
// head and a value head, its backward pass, the Adam optimizer, and the
// action distributions (categorical for discrete actions, diagonal Gaussian
// for continuous ones).
//
// All trainable parameters of an [ActorCritic] live in one flat []float32
// described by [ActorCritic.Layout]. A single vector is cheap to ship
// between learner and actors, to checkpoint, and for an optimizer such as
// [Adam] to update in one pass; the layout is what gives it structure.
//
// Dense layers compute y = x·W + b with x of shape [batch, in] and W of
// shape [in, out], both row-major, so that a batch maps onto one GEMM.
// Matrix products go through OpenBLAS (cgo, Debian's libopenblas-dev; one
// thread per process unless OPENBLAS_NUM_THREADS says otherwise): Sgemm, or
// Sgemv and Sger for layers only a few outputs wide (the heads). Built with
// the tag noopenblas they go through gonum's pure-Go BLAS instead, for a
// machine without the library; the two agree to float32 rounding. [BLAS]
// says which one a binary has. A layer whose weights fit the L1 cache, and
// any layer of a few rows (an actor's ring), runs instead in one call of
// vectorised C (dense.c: bias, product and activation together), which
// those shapes run faster than OpenBLAS, whose GEMM packs both operands.
//
// A network on images puts 2-D convolutions ([Spec].Conv) before the dense
// layers: observations are [H, W, C] images, channels last, given as flat
// rows of ObsDim = H·W·C values ([Spec].InputShape), and each convolution
// is followed by the hidden layers' activation. Both heads share the
// convolutions (see [Spec].SharedTrunk for why), whose flattened output
// feeds the dense layers. They run as GEMMs too: im2col lowers a chunk of
// images to one row per output pixel holding its window (Kernel·Kernel·C
// values in (ky, kx, c) order, one contiguous copy per window row since
// channels are last), and one product with the [Kernel·Kernel·C, Filters]
// weights gives the output, already channels last. Backward lowers the
// input again for the weight gradient and scatters the patches' gradient
// back (col2im) for the layer below. Their weights sit first in the
// parameter vector; [ParamInfo] gives the layout.
//
// A [Workspace] keeps the activations of the last [ActorCritic.Forward] so
// that [ActorCritic.Backward] can reuse them, and so that repeated forward
// passes at the same batch size do not allocate. An ActorCritic is safe for
// concurrent Forward and Backward calls as long as each goroutine uses its
// own Workspace and Output and nobody writes the parameters meanwhile.
//
// Errors are returned, never panicked, for bad shapes and specs. The
// single-row distribution helpers (SampleCategorical, GaussianLogProb, ...)
// sit on hot paths and return no error; they report misuse through NaN or
// an action of -1 instead, as documented on each.
package nn
