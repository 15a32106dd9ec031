package api

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestConfigInt(t *testing.T) {
	tests := []struct {
		v    any
		want int
		err  string
	}{
		{nil, 7, ""}, // default
		{int(3), 3, ""},
		{int8(-3), -3, ""},
		{int16(300), 300, ""},
		{int32(-70000), -70000, ""},
		{int64(1 << 40), 1 << 40, ""},
		{uint8(200), 200, ""},
		{uint16(60000), 60000, ""},
		{uint32(1 << 31), 1 << 31, ""},
		{uint64(5), 5, ""},
		{uint(6), 6, ""},
		{float64(25), 25, ""},
		{float32(2), 2, ""},
		{json.Number("12"), 12, ""},
		{json.Number("1e3"), 1000, ""},
		{uint64(math.MaxUint64), 0, "overflows"},
		{2.5, 0, "not an integer"},
		{math.NaN(), 0, "not an integer"},
		{math.Inf(1), 0, "not an integer"},
		{1e19, 0, "not an integer"},
		{json.Number("x"), 0, "not a number"},
		{"3", 0, "want an integer"},
		{true, 0, "want an integer"},
	}
	for _, tc := range tests {
		c := Config{"k": tc.v}
		if tc.v == nil {
			c = nil
		}
		got, err := c.Int("k", 7)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `"k"`) {
				t.Errorf("Int(%T %v) error = %v, want one containing %q and the key", tc.v, tc.v, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Int(%T %v) = %d, %v; want %d", tc.v, tc.v, got, err, tc.want)
		}
	}
}

func TestConfigFloatBoolString(t *testing.T) {
	c := Config{"f": int8(3), "g": json.Number("0.5"), "b": true, "s": "x", "bad": "y"}
	if f, err := c.Float("f", 0); err != nil || f != 3 {
		t.Errorf("Float(int8) = %v, %v", f, err)
	}
	if f, err := c.Float("g", 0); err != nil || f != 0.5 {
		t.Errorf("Float(json.Number) = %v, %v", f, err)
	}
	if f, err := c.Float("missing", 1.5); err != nil || f != 1.5 {
		t.Errorf("Float(missing) = %v, %v", f, err)
	}
	if _, err := c.Float("bad", 0); err == nil {
		t.Error("Float(string) succeeded")
	}
	if b, err := c.Bool("b", false); err != nil || !b {
		t.Errorf("Bool = %v, %v", b, err)
	}
	if _, err := c.Bool("s", false); err == nil {
		t.Error("Bool(string) succeeded")
	}
	if s, err := c.String("s", ""); err != nil || s != "x" {
		t.Errorf("String = %q, %v", s, err)
	}
	if _, err := c.String("b", ""); err == nil {
		t.Error("String(bool) succeeded")
	}
	if err := c.CheckKeys("f", "g", "b", "s"); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("CheckKeys = %v, want an error naming \"bad\"", err)
	}
	if err := c.CheckKeys("f", "g", "b", "s", "bad"); err != nil {
		t.Errorf("CheckKeys(all) = %v", err)
	}
}
