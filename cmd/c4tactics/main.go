// Command c4tactics plays a kept version of a connect4 policy against one
// of the game's built-in opponents and counts, besides wins and losses,
// its tactical slips: immediate wins not taken, playable threats not
// blocked, and discs put right under the opponent's four
// (env.Connect4Classify). It says why a version loses to the scripted
// opponent, which plays every one of those right (docs/policies.md).
//
//	c4tactics [-games 400] [-opponent scripted] [-sample] [-hidden 256] [-conv 64x4] VERSIONFILE...
//
// A version file is one a trainer keeps, CHECKPOINT_DIR/versions/vN-EPOCH.params;
// -hidden and -conv give the network's shape, as in the trial's config.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
)

func main() {
	games := flag.Int("games", 400, "games per version")
	opponent := flag.String("opponent", env.Connect4Scripted, "the built-in opponent: random or scripted")
	sample := flag.Bool("sample", false, "sample actions (as in training) instead of the greedy ones (as evaluated)")
	hidden := flag.String("hidden", "256", "hidden layer widths, comma separated")
	conv := flag.String("conv", "64x4", "convolutions FILTERSxKERNEL (stride 1), comma separated; empty: none")
	flag.Parse()
	if err := run(*games, *opponent, *sample, *hidden, *conv, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "c4tactics:", err)
		os.Exit(1)
	}
}

func run(games int, opponent string, sample bool, hidden, conv string, files []string) error {
	if len(files) == 0 {
		return errors.New("no version file given")
	}
	if err := env.Register(); err != nil {
		return err
	}
	cfg, err := policy.ConfigForEnv(env.Connect4Name, map[string]any{"opponent": opponent})
	if err != nil {
		return err
	}
	var widths []int
	for _, f := range strings.Split(hidden, ",") {
		w, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("-hidden %q: %w", hidden, err)
		}
		widths = append(widths, w)
	}
	layers := []nn.ConvLayer{}
	for _, f := range strings.FieldsFunc(conv, func(r rune) bool { return r == ',' }) {
		var l nn.ConvLayer
		if _, err := fmt.Sscanf(f, "%dx%d", &l.Filters, &l.Kernel); err != nil {
			return fmt.Errorf("-conv %q: %w", conv, err)
		}
		l.Stride = 1
		layers = append(layers, l)
	}
	cfg = cfg.WithShape(widths, "").WithConv(layers)
	cfg.Deterministic = !sample
	for _, file := range files {
		if err := tally(cfg, file, games, opponent); err != nil {
			return err
		}
	}
	return nil
}

// tally plays the version in file and prints its counts.
func tally(cfg policy.Config, file string, games int, opponent string) error {
	var v paramstream.Version
	name := strings.TrimSuffix(filepath.Base(file), ".params")
	if _, err := fmt.Sscanf(name, "v%d-%x", &v.Version, &v.Epoch); err != nil {
		return fmt.Errorf("%s: want a kept version's file, vN-EPOCH.params: %w", file, err)
	}
	v.Path = file
	data, err := paramstream.Load(v)
	if err != nil {
		return err
	}
	p, err := policy.New(cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.SetParams(v.Version, data); err != nil {
		return err
	}
	g, err := env.NewConnect4(opponent)
	if err != nil {
		return err
	}
	var won, lost, drawn, moves, couldWin, missedWin, mustBlock, missedBlock, gave int
	batch := api.NewTensor[float32](1, cfg.ObsDim)
	var out api.Inference
	for game := range games {
		obs, err := g.Reset(int64(game))
		if err != nil {
			return err
		}
		for {
			copy(batch.Row(0), obs[0])
			if err := p.Infer(batch, &out); err != nil {
				return err
			}
			col := out.Actions.Data[0]
			m := env.Connect4Classify(obs[0], int(col))
			moves++
			switch {
			case m.CouldWin:
				couldWin++
				if !m.Won {
					missedWin++
				}
			case m.MustBlock:
				mustBlock++
				if !m.Blocked {
					missedBlock++
				}
			case m.GaveWin:
				gave++
			}
			s, err := g.Step([]api.Action{{Discrete: col}})
			if err != nil {
				return err
			}
			if obs = s.Obs; !s.Done() {
				continue
			}
			switch r := s.Rewards[0]; {
			case r > 0:
				won++
			case r < 0:
				lost++
			default:
				drawn++
			}
			break
		}
	}
	fmt.Printf("v%d against %s, %d games: won %d lost %d drawn %d | %d moves: wins missed %d of %d, blocks missed %d of %d, wins handed over %d\n",
		v.Version, opponent, games, won, lost, drawn, moves, missedWin, couldWin, missedBlock, mustBlock, gave)
	return nil
}
