package etcdserver

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newZapLogger returns the logger handed to etcd: only errors and worse,
// forwarded to lg. etcd logs every start-up step at info level, which would
// drown a training run's output.
func newZapLogger(lg *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{lg: lg})
}

// slogCore is a zapcore.Core that forwards error-level entries to slog.
type slogCore struct {
	lg     *slog.Logger
	fields []zapcore.Field
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= zapcore.ErrorLevel }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{lg: c.lg, fields: append(append([]zapcore.Field(nil), c.fields...), fields...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range c.fields {
		f.AddTo(enc)
	}
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields)+1)
	attrs = append(attrs, slog.String("component", "etcd"))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	level := slog.LevelError
	if benign[e.Message] {
		level = slog.LevelDebug
	}
	c.lg.LogAttrs(context.Background(), level, e.Message, attrs...)
	return nil
}

// benign are error-level messages etcd logs in normal operation: a fresh
// single-member cluster has no term yet when it first checks its storage
// schema, and says so on every first start.
var benign = map[string]bool{
	"failed to update storage version": true,
}

func (c *slogCore) Sync() error { return nil }
