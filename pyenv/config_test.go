package pyenv

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	t.Setenv(InterpreterEnv, "/opt/py/bin/python3")
	tests := []struct {
		name    string
		cfg     map[string]any
		want    Config
		wantErr string
	}{
		{name: "defaults", cfg: map[string]any{"module": "m"},
			want: Config{Python: "/opt/py/bin/python3", Module: "m", Factory: "make_env", StartTimeout: DefaultStartTimeout, StepTimeout: DefaultStepTimeout}},
		{name: "everything", cfg: map[string]any{"module": "m", "factory": "f", "python": "py", "kwargs": map[string]any{"a": 1},
			"path": []any{"/x", "/y"}, "start_timeout_s": 2, "step_timeout_s": 0.5},
			want: Config{Python: "py", Module: "m", Factory: "f", Kwargs: map[string]any{"a": 1}, Path: []string{"/x", "/y"},
				StartTimeout: 2 * time.Second, StepTimeout: 500 * time.Millisecond}},
		{name: "path as a string", cfg: map[string]any{"module": "m", "path": "/x"},
			want: Config{Python: "/opt/py/bin/python3", Module: "m", Factory: "make_env", Path: []string{"/x"},
				StartTimeout: DefaultStartTimeout, StepTimeout: DefaultStepTimeout}},
		{name: "no module", cfg: map[string]any{}, wantErr: "needs module"},
		{name: "misspelt key", cfg: map[string]any{"module": "m", "modul": "x"}, wantErr: "modul"},
		{name: "kwargs not a map", cfg: map[string]any{"module": "m", "kwargs": []any{1}}, wantErr: "kwargs"},
		{name: "path of numbers", cfg: map[string]any{"module": "m", "path": []any{1}}, wantErr: "path"},
		{name: "zero timeout", cfg: map[string]any{"module": "m", "step_timeout_s": 0}, wantErr: "step_timeout_s"},
		{name: "module not a string", cfg: map[string]any{"module": 3}, wantErr: "module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Python != tt.want.Python || got.Module != tt.want.Module || got.Factory != tt.want.Factory ||
				!slices.Equal(got.Path, tt.want.Path) || got.StartTimeout != tt.want.StartTimeout ||
				got.StepTimeout != tt.want.StepTimeout || len(got.Kwargs) != len(tt.want.Kwargs) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
