package pyenv

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/distrl/distrl/api"
)

// Defaults of Config.
const (
	DefaultFactory      = "make_env"
	DefaultStartTimeout = 25 * time.Second // under the controller's 30 s configure timeout
	DefaultStepTimeout  = 30 * time.Second
	// InterpreterEnv names the environment variable that overrides the
	// default interpreter, "python3".
	InterpreterEnv = "DISTRL_PYTHON"
)

// Config is an env_config of the "python" environment.
type Config struct {
	// Python is the interpreter; default $DISTRL_PYTHON, else "python3".
	// It needs pyzmq and msgpack.
	Python string
	// Module is imported, and Factory (default "make_env") in it is called
	// with Kwargs once per environment.
	Module  string
	Factory string
	Kwargs  map[string]any
	// Path holds directories put first on the host's sys.path, where
	// Module may live.
	Path []string
	// StartTimeout bounds the start (interpreter, import, factories);
	// StepTimeout every later request. A host past its deadline is killed.
	StartTimeout, StepTimeout time.Duration
}

// ParseConfig reads an env_config map: python, module, factory, kwargs,
// path, start_timeout_s, step_timeout_s.
func ParseConfig(cfg map[string]any) (Config, error) {
	c := api.Config(cfg)
	if err := c.CheckKeys("python", "module", "factory", "kwargs", "path", "start_timeout_s", "step_timeout_s"); err != nil {
		return Config{}, err
	}
	var out Config
	var err error
	if out.Python, err = c.String("python", ""); err != nil {
		return Config{}, err
	}
	if out.Module, err = c.String("module", ""); err != nil {
		return Config{}, err
	}
	if out.Factory, err = c.String("factory", ""); err != nil {
		return Config{}, err
	}
	if out.StartTimeout, err = seconds(c, "start_timeout_s", DefaultStartTimeout); err != nil {
		return Config{}, err
	}
	if out.StepTimeout, err = seconds(c, "step_timeout_s", DefaultStepTimeout); err != nil {
		return Config{}, err
	}
	switch p := cfg["path"].(type) {
	case nil:
	case string:
		out.Path = []string{p}
	case []any:
		for _, v := range p {
			s, ok := v.(string)
			if !ok {
				return Config{}, fmt.Errorf("pyenv: path holds a %T, want directory names", v)
			}
			out.Path = append(out.Path, s)
		}
	case []string:
		out.Path = append(out.Path, p...)
	default:
		return Config{}, fmt.Errorf("pyenv: path is a %T, want a list of directories", p)
	}
	if k, ok := cfg["kwargs"]; ok && k != nil {
		m, ok := k.(map[string]any)
		if !ok {
			return Config{}, fmt.Errorf("pyenv: kwargs is a %T, want a map", k)
		}
		out.Kwargs = m
	}
	out = out.withDefaults()
	if out.Module == "" {
		return Config{}, fmt.Errorf("pyenv: env_config needs module (the Python module whose %s builds the environment)", out.Factory)
	}
	return out, nil
}

func seconds(c api.Config, key string, def time.Duration) (time.Duration, error) {
	f, err := c.Float(key, def.Seconds())
	if err != nil {
		return 0, err
	}
	if f <= 0 {
		return 0, fmt.Errorf("pyenv: %s %v, want > 0", key, f)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// withDefaults fills the zero fields of a Config built in code.
func (c Config) withDefaults() Config {
	c.Python = cmp.Or(c.Python, os.Getenv(InterpreterEnv), "python3")
	c.Factory = cmp.Or(c.Factory, DefaultFactory)
	c.StartTimeout = cmp.Or(c.StartTimeout, DefaultStartTimeout)
	c.StepTimeout = cmp.Or(c.StepTimeout, DefaultStepTimeout)
	return c
}
