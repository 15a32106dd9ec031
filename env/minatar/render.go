package minatar

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"unicode"
)

// Render returns the current observation as text for debugging: a line per
// row, a character per cell: '.' for an empty cell, else the glyph of a
// channel set there, objects (letters) over trails and gauges. The glyphs
// are listed by [Legend].
func (e *Env) Render() string {
	c := len(e.spec.channels)
	var b strings.Builder
	b.Grow(Size * (Size + 1))
	for r := range Size {
		for col := range Size {
			cell := e.obs[(r*Size+col)*c : (r*Size+col+1)*c]
			glyph := '.'
			for ch, v := range cell {
				g := rune(e.spec.glyphs[ch])
				if v != 0 && (glyph == '.' || unicode.IsLetter(g) && !unicode.IsLetter(glyph)) {
					glyph = g
				}
			}
			b.WriteRune(glyph)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Legend returns the glyph of each channel of the game, as "P=player ...".
func (e *Env) Legend() string {
	parts := make([]string, len(e.spec.channels))
	for i, name := range e.spec.channels {
		parts[i] = fmt.Sprintf("%c=%s", e.spec.glyphs[i], name)
	}
	return strings.Join(parts, " ")
}

// palette colours channels in the PNG, by channel index.
var palette = []color.RGBA{
	{255, 255, 255, 255}, // the player: white
	{230, 60, 60, 255},
	{90, 90, 160, 255},
	{240, 200, 40, 255},
	{60, 200, 90, 255},
	{230, 120, 30, 255},
	{200, 80, 220, 255},
	{60, 200, 220, 255},
	{150, 150, 150, 255},
	{120, 220, 140, 255},
}

// WritePNG writes the current observation as a PNG image, scale pixels a
// cell, each cell the colour of its first channel set (black if none).
func (e *Env) WritePNG(w io.Writer, scale int) error {
	if scale < 1 || scale > 256 {
		return fmt.Errorf("minatar: PNG scale %d, want 1 to 256", scale)
	}
	c := len(e.spec.channels)
	img := image.NewRGBA(image.Rect(0, 0, Size*scale, Size*scale))
	for r := range Size {
		for col := range Size {
			px := color.RGBA{A: 255}
			for ch := range c {
				if e.obs[(r*Size+col)*c+ch] != 0 {
					px = palette[ch%len(palette)]
					break
				}
			}
			for y := r * scale; y < (r+1)*scale; y++ {
				for x := col * scale; x < (col+1)*scale; x++ {
					img.SetRGBA(x, y, px)
				}
			}
		}
	}
	return png.Encode(w, img)
}
