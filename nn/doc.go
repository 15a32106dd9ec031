// Package nn implements the small neural networks that distrl's
// actor-critic learners (PPO on CartPole-sized problems and friends) use:
// a batched, float32 multilayer perceptron with a policy head and a value
// head, its backward pass, the Adam optimizer, and the action distributions
// (categorical for discrete actions, diagonal Gaussian for continuous ones).
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
// says which one a binary has.
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
