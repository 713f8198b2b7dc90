package sanitize

import (
	"context"
	"fmt"
	"log/slog"
)

// LogHandler wraps a slog.Handler so that every record's message and every
// string-like attribute (strings, errors, Stringers, anything formatted)
// goes through Redactor.Log: a worker or gateway logs run errors, stderr
// tails and caller input at many call sites, and one wrapper at the logger
// is what makes sure none of them writes a credential.
func LogHandler(h slog.Handler, r *Redactor) slog.Handler {
	if lh, ok := h.(*logHandler); ok {
		h = lh.next // never wrap twice
	}
	return &logHandler{next: h, r: r}
}

type logHandler struct {
	next slog.Handler
	r    *Redactor
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Log(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = h.attr(a)
	}
	return &logHandler{next: h.next.WithAttrs(red), r: h.r}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name), r: h.r}
}

func (h *logHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Log(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = h.attr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.Log(x.Error()))
		case fmt.Stringer:
			return slog.String(a.Key, h.r.Log(x.String()))
		case []byte:
			return slog.String(a.Key, h.r.Log(string(x)))
		case nil:
			return a
		default:
			// a struct, map or slice: keep its shape unless its text
			// holds something to mask
			if s := fmt.Sprint(x); h.r.Log(s) != s {
				return slog.String(a.Key, h.r.Log(s))
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
