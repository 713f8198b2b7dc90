package supervise

import (
	"bytes"
	"io"
	"sync"
)

// prefixed is the shared output of a group's children: whole lines only,
// each with its child's name, so two children's lines never interleave.
type prefixed struct {
	mu sync.Mutex
	w  io.Writer
}

// writer is one output stream of a child; when ready is not empty, the
// first line that starts with it calls onReady.
func (p *prefixed) writer(name, ready string, onReady func()) io.Writer {
	return &lineWriter{out: p, prefix: []byte(name + " | "), ready: []byte(ready), onReady: onReady}
}

// lineWriter buffers a partial line until its end arrives.
type lineWriter struct {
	out     *prefixed
	prefix  []byte
	ready   []byte
	onReady func()
	partial []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i+1]
		if l.onReady != nil && len(l.ready) > 0 && bytes.HasPrefix(line, l.ready) {
			l.onReady()
		}
		l.out.mu.Lock()
		_, _ = l.out.w.Write(append(append([]byte{}, l.prefix...), line...))
		l.out.mu.Unlock()
		l.partial = l.partial[i+1:]
	}
	return len(b), nil
}
