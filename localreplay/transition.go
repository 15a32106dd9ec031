package localreplay

import (
	"fmt"

	"github.com/distrl/distrl/internal/zsock"
)

// DecodeTransition decodes one replay item into tr, reusing its storage.
// The item is checked first (zsock.Decoder): a header that claims more than
// the item holds fails before anything is allocated for it.
func DecodeTransition(d *zsock.Decoder, item []byte, tr *Transition) error {
	dec, err := d.Reset(item)
	if err != nil {
		return fmt.Errorf("localreplay: transition: %w", err)
	}
	if err := dec.Decode(tr); err != nil {
		return fmt.Errorf("localreplay: transition: %w", err)
	}
	return d.Finish()
}
