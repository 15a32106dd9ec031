package worker

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/distrl/distrl/rpc"
	"github.com/vmihailenco/msgpack/v5"
)

// DecodeConfig decodes a worker type's "configure" kwargs into cfg, a
// pointer to its configuration, with rpc.Args.Decode (strict: a key cfg has
// no field for is an error). Absent and nil kwargs leave cfg as it is,
// defaults included, and so does an empty map. A failure is a bad_arguments
// *rpc.Error reading "<what>: <what is wrong>", which Configure can return
// as is; where a struct's key is to blame it is named: `unknown key
// "ring_sise" (known: ...)` or `key "ring_size": <the decoder's message>`.
func DecodeConfig(args rpc.Args, what string, cfg any) error {
	err := args.Decode(cfg)
	re, ok := errors.AsType[*rpc.Error](err)
	if !ok {
		return err
	}
	if msg, found := blameKey(args.Raw(), cfg); found {
		return rpc.Errorf(re.Type, "%s: %s", what, msg)
	}
	return rpc.Errorf(re.Type, "%s: %s", what, re.Message)
}

// blameKey finds the first key (in sorted order) of the kwargs map raw that
// fails to decode into a fresh value of cfg's struct type on its own, and
// says why. found is false when raw is not a map, cfg not a pointer to a
// struct, or no single key fails.
func blameKey(raw []byte, cfg any) (msg string, found bool) {
	t := reflect.TypeOf(cfg)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return "", false
	}
	var kwargs map[string]msgpack.RawMessage
	if msgpack.Unmarshal(raw, &kwargs) != nil {
		return "", false
	}
	keys := make([]string, 0, len(kwargs))
	for k := range kwargs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	known := fieldNames(t.Elem())
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return `unknown key "` + k + `" (known: ` + strings.Join(known, ", ") + ")", true
		}
		one, err := msgpack.Marshal(map[string]msgpack.RawMessage{k: kwargs[k]})
		if err != nil {
			continue
		}
		dec := msgpack.NewDecoder(bytes.NewReader(one))
		dec.DisallowUnknownFields(true)
		if err := dec.Decode(reflect.New(t.Elem()).Interface()); err != nil {
			msg := err.Error()
			if strings.HasPrefix(msg, "msgpack: ") { // the decoder's words: say it plainly
				var v any
				_ = msgpack.Unmarshal(kwargs[k], &v)
				msg = fmt.Sprintf("want %s, got %#v", kindName(fieldType(t.Elem(), k)), v)
			}
			return `key "` + k + `": ` + msg, true
		}
	}
	return "", false
}

// kindName says in words what a field of type t takes.
func kindName(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return "a " + t.String()
}

// fieldType is the type of the field of struct type t with msgpack key
// key, or nil.
func fieldType(t reflect.Type, key string) reflect.Type {
	for f := range t.Fields() {
		tag := f.Tag.Get("msgpack")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			if ft := fieldType(f.Type, key); ft != nil {
				return ft
			}
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == key || name == "" && f.Name == key {
			return f.Type
		}
	}
	return nil
}

// fieldNames are the msgpack keys of struct type t, sorted.
func fieldNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("msgpack")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, fieldNames(f.Type)...) // msgpack inlines it
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
