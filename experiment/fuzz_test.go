package experiment_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/internal/msgpackcheck/mptest"
)

// FuzzParse: any experiment file parses or fails with an error, within an
// allocation bound set by its size (YAML aliases must not expand into a
// bomb); a parsed one validates or fails without panicking, and its YAML
// parses again.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("builtin/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"", "name: x", "{}", "[]", "name: [", "workers: {a: {count: -1}}", "stop: {wall_time: 1e400h}",
		// An alias bomb: 9 levels of 9 references each.
		"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
			"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n" +
			"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n",
		"name: x\nworkers:\n  actor: {count: 1, config: {a: &r [1, *r]}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var c *experiment.Config
		mptest.BoundedAlloc(t, in, func() {
			c, _ = experiment.Parse(in)
		})
		if c == nil {
			return
		}
		_ = c.Validate([]string{"actor", "policy", "trainer", "sink", "echo"})
		y, err := c.YAML()
		if err != nil {
			return // values YAML cannot hold (NaN keys...) are refused, not panicked on
		}
		if _, err := experiment.Parse(y); err != nil {
			t.Fatalf("%q parsed, its YAML %q does not: %v", in, y, err)
		}
	})
}
