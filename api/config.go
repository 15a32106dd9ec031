package api

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Config is an environment or policy configuration as decoded from msgpack,
// JSON or YAML. Numbers arrive as whatever type the decoder chose (int8,
// uint16, int64, float64, json.Number, ...), so the accessors accept any
// numeric kind and convert when the value is exactly representable.
//
// A factory converts its argument with Config(cfg); a nil map is an empty
// configuration.
type Config map[string]any

// Int returns the integer at key, or def if the key is absent or nil.
// Floats are accepted when they hold an integral value.
func (c Config) Int(key string, def int) (int, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	n, err := toInt(v)
	if err != nil {
		return 0, fmt.Errorf("api: config %q: %w", key, err)
	}
	return n, nil
}

// Float returns the number at key as a float64, or def if the key is absent
// or nil.
func (c Config) Float(key string, def float64) (float64, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	f, err := toFloat(v)
	if err != nil {
		return 0, fmt.Errorf("api: config %q: %w", key, err)
	}
	return f, nil
}

// Bool returns the boolean at key, or def if the key is absent or nil.
func (c Config) Bool(key string, def bool) (bool, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("api: config %q: got %T, want a bool", key, v)
	}
	return b, nil
}

// String returns the string at key, or def if the key is absent or nil.
func (c Config) String(key string, def string) (string, error) {
	v, ok := c[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("api: config %q: got %T, want a string", key, v)
	}
	return s, nil
}

// CheckKeys returns an error naming every key of c that is not in known, so
// a misspelt option fails loudly instead of silently keeping its default.
func (c Config) CheckKeys(known ...string) error {
	var bad []string
	for k := range c {
		if !slices.Contains(known, k) {
			bad = append(bad, strconv.Quote(k))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("api: unknown config keys %s (known: %s)", strings.Join(bad, ", "), strings.Join(known, ", "))
}

func toInt(v any) (int, error) {
	switch x := v.(type) {
	case int:
		return x, nil
	case int8:
		return int(x), nil
	case int16:
		return int(x), nil
	case int32:
		return int(x), nil
	case int64:
		if int64(int(x)) != x {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case uint:
		if x > math.MaxInt {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case uint8:
		return int(x), nil
	case uint16:
		return int(x), nil
	case uint32:
		if uint64(x) > math.MaxInt {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case uint64:
		if x > math.MaxInt {
			return 0, fmt.Errorf("%d overflows int", x)
		}
		return int(x), nil
	case float32:
		return floatToInt(float64(x))
	case float64:
		return floatToInt(x)
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 0); err == nil {
			return int(n), nil
		}
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", string(x))
		}
		return floatToInt(f)
	}
	return 0, fmt.Errorf("got %T, want an integer", v)
}

func floatToInt(f float64) (int, error) {
	// 2^63 is exactly representable, so the range check is exact; the
	// truncation check rejects 2.5 rather than rounding it silently.
	if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 || int64(int(f)) != int64(f) {
		return 0, fmt.Errorf("%v is not an integer that fits in int", f)
	}
	return int(f), nil
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", string(x))
		}
		return f, nil
	case int:
		return float64(x), nil
	case int8:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint:
		return float64(x), nil
	case uint8:
		return float64(x), nil
	case uint16:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("got %T, want a number", v)
}
