package sanitize

import (
	"math"
	"strconv"
)

// hasNestedRepetition ports the reference's conservative safe-regex check:
// a quantifier applied to something that already repeats, or an unbounded
// quantifier applied to an alternation whose branches differ in length, is
// rejected as a catastrophic-backtracking risk. RE2 would run such a pattern
// in linear time, but a config that the reference ignores as unsafe should
// not silently mean something different here.
func hasNestedRepetition(source string) bool {
	c := repetitionCheck{frames: []*repFrame{{}}}
	for _, tk := range safeRegexTokens([]rune(source)) {
		switch tk.kind {
		case 's':
			c.emit(&repItem{min: 1, max: 1})
		case '(':
			c.frames = append(c.frames, &repFrame{})
		case ')':
			c.closeGroup()
		case '|':
			c.alternate()
		case 'q':
			if c.quantify(tk) {
				return true
			}
		}
	}
	return false
}

// safeRegexTokens splits a pattern into the check's tokens: an escape and
// a whole character class are one simple token each.
func safeRegexTokens(src []rune) []reTok {
	var toks []reTok
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inClass {
			if c == '\\' {
				i++
			} else if c == ']' {
				inClass = false
			}
			continue
		}
		switch c {
		case '\\':
			i++
			toks = append(toks, reTok{kind: 's'})
			continue
		case '[':
			inClass = true
			toks = append(toks, reTok{kind: 's'})
			continue
		case '(':
			toks = append(toks, reTok{kind: '('})
			continue
		case ')':
			toks = append(toks, reTok{kind: ')'})
			continue
		case '|':
			toks = append(toks, reTok{kind: '|'})
			continue
		}
		if q, n, ok := readJSQuantifier(src, i); ok {
			toks = append(toks, q)
			i += n - 1
			continue
		}
		toks = append(toks, reTok{kind: 's'})
	}
	return toks
}

// repItem is what the check knows of one item of a branch (a simple token
// or a closed group): whether it repeats, whether it is an alternation
// whose branches differ in length, and the bounds of its length.
type repItem struct {
	rep, ambiguous bool
	min, max       float64
}

// repFrame is an open group (the outermost one is the whole pattern): its
// last item, whether anything in it repeats, whether it has alternatives,
// the length bounds of the current branch (b) and of the branches ended so
// far (a).
type repFrame struct {
	last       *repItem
	rep, alt   bool
	bMin, bMax float64
	aMin, aMax float64
	haveAlt    bool
}

// repetitionCheck follows the groups open at the current token.
type repetitionCheck struct {
	frames []*repFrame
}

func (c *repetitionCheck) top() *repFrame { return c.frames[len(c.frames)-1] }

// emit appends item to the current branch.
func (c *repetitionCheck) emit(item *repItem) {
	f := c.top()
	f.last = item
	if item.rep {
		f.rep = true
	}
	f.bMin += item.min
	f.bMax += item.max
}

// endBranch folds the current branch's length bounds into the group's.
func (f *repFrame) endBranch() {
	if !f.haveAlt {
		f.aMin, f.aMax, f.haveAlt = f.bMin, f.bMax, true
		return
	}
	f.aMin = math.Min(f.aMin, f.bMin)
	f.aMax = math.Max(f.aMax, f.bMax)
}

// closeGroup ends the innermost group and emits it as one item of the
// enclosing branch; a ')' with no group open is ignored.
func (c *repetitionCheck) closeGroup() {
	if len(c.frames) <= 1 {
		return
	}
	f := c.top()
	c.frames = c.frames[:len(c.frames)-1]
	if f.alt {
		f.endBranch()
	}
	mn, mx := f.bMin, f.bMax
	if f.alt {
		mn, mx = f.aMin, f.aMax
	}
	c.emit(&repItem{rep: f.rep, ambiguous: f.alt && f.aMin != f.aMax, min: mn, max: mx})
}

// alternate ends the current branch at a '|' and starts the next.
func (c *repetitionCheck) alternate() {
	f := c.top()
	f.alt = true
	f.endBranch()
	f.bMin, f.bMax, f.last = 0, 0, nil
}

// quantify applies quantifier q to the last item of the current branch,
// or reports nested repetition: the item already repeats, or it is an
// ambiguous alternation and q is unbounded. A quantifier with nothing
// before it is ignored.
func (c *repetitionCheck) quantify(q reTok) (nested bool) {
	f := c.top()
	prev := f.last
	if prev == nil {
		return false
	}
	unbounded := math.IsInf(q.max, 1)
	if prev.rep || (prev.ambiguous && unbounded) {
		return true
	}
	pMin, pMax := prev.min, prev.max
	prev.min *= q.min
	if unbounded {
		prev.max = math.Inf(1)
	} else {
		prev.max = mulLen(prev.max, q.max)
	}
	prev.rep = true
	f.rep = true
	f.bMin = f.bMin - pMin + prev.min
	if math.IsInf(f.bMax, 1) || math.IsInf(pMax, 1) {
		f.bMax = math.Inf(1)
	} else {
		f.bMax = f.bMax - pMax + prev.max
	}
	return false
}

func mulLen(l, f float64) float64 {
	if math.IsInf(l, 1) {
		if f == 0 {
			return 0
		}
		return l
	}
	return l * f
}

// reTok is a token of the safe-regex tokenizer: 's' simple, '(' open,
// ')' close, '|' alternation, 'q' quantifier (with its repeat bounds).
type reTok struct {
	kind     byte
	min, max float64
}

// readJSQuantifier reads *, +, ?, {n}, {n,} or {n,m} (optionally lazy) at i.
func readJSQuantifier(src []rune, i int) (q reTok, consumed int, ok bool) {
	q.kind = 'q'
	lazy := func(n int) int {
		if i+n < len(src) && src[i+n] == '?' {
			return n + 1
		}
		return n
	}
	switch src[i] {
	case '*':
		q.min, q.max = 0, math.Inf(1)
		return q, lazy(1), true
	case '+':
		q.min, q.max = 1, math.Inf(1)
		return q, lazy(1), true
	case '?':
		q.min, q.max = 0, 1
		return q, lazy(1), true
	case '{':
	default:
		return q, 0, false
	}
	j := i + 1
	st := j
	for j < len(src) && src[j] >= '0' && src[j] <= '9' {
		j++
	}
	if j == st {
		return q, 0, false
	}
	lo, _ := strconv.ParseFloat(string(src[st:j]), 64)
	hi := lo
	if j < len(src) && src[j] == ',' {
		j++
		ms := j
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		if j == ms {
			hi = math.Inf(1)
		} else {
			hi, _ = strconv.ParseFloat(string(src[ms:j]), 64)
		}
	}
	if j >= len(src) || src[j] != '}' {
		return q, 0, false
	}
	j++
	if j < len(src) && src[j] == '?' {
		j++
	}
	if hi < lo {
		return q, 0, false
	}
	q.min, q.max = lo, hi
	return q, j - i, true
}
