package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aifs/aifs/internal/human"
)

// progressBar redraws one status line on a terminal at most every 100 ms. Its methods must be
// called from one goroutine at a time.
type progressBar struct {
	w     io.Writer
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar { return &progressBar{w: w, start: time.Now()} }

// update draws done/total bytes with an extra note (e.g. a file count), unless drawn too recently.
func (p *progressBar) update(done, total int64, note string) {
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && done != total {
		return
	}
	p.last = now
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	const width = 30
	fill := int(frac * width)
	rate := float64(done) / max(now.Sub(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %s/%s %s %s/s\x1b[K", strings.Repeat("#", fill), strings.Repeat(" ", width-fill),
		100*frac, human.Bytes(done), human.Bytes(total), note, human.Bytes(int64(rate)))
	p.drawn = true
}

// clear erases the line so that the summary or an error starts at column 0.
func (p *progressBar) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
