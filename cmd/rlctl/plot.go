package main

import (
	"fmt"
	"image/color"
	"os"

	"github.com/distrl/distrl/controller"
	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func plotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "plot a trial's metrics.jsonl: mean return vs env steps, and steps/s vs time (PNG)",
		ArgsUsage: "EXPERIMENT TRIAL",
		Flags: withGlobal(
			workdirFlag(),
			&cli.StringFlag{Name: "out", Usage: "where to write the PNG (default: plot.png in the trial directory)"},
		),
		Action: interspersed(runPlot),
	}
}

func runPlot(c *cli.Context, args []string) error {
	dir, err := trialArgs(c, "plot", args)
	if err != nil {
		return err
	}
	ms, err := readMetrics(dir.Path(controller.MetricsFile))
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	if len(ms) == 0 {
		return cli.Exit(fmt.Sprintf("%s: no metrics yet", dir.Path(controller.MetricsFile)), exitFailed)
	}
	out := c.String("out")
	if out == "" {
		out = dir.Path(controller.PlotFile)
	}
	if err := writePlot(out, experimentName(args[0])+"/"+args[1], ms); err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	fmt.Println(out)
	return nil
}

// writePlot draws two panels, one above the other, into a PNG at path.
func writePlot(path, title string, ms []controller.Metrics) error {
	var ret, rate plotter.XYs
	for _, m := range ms {
		if m.MeanReturn != nil {
			ret = append(ret, plotter.XY{X: float64(m.EnvSteps), Y: *m.MeanReturn})
		}
		rate = append(rate, plotter.XY{X: m.ElapsedS, Y: m.StepsPerS})
	}
	top := plot.New()
	top.Title.Text = title + ": mean return (last 20 episodes)"
	top.X.Label.Text = "env steps"
	top.Y.Label.Text = "mean return"
	if err := addLine(top, ret, color.RGBA{R: 31, G: 119, B: 180, A: 255}); err != nil {
		return err
	}
	bottom := plot.New()
	bottom.Title.Text = "throughput"
	bottom.X.Label.Text = "seconds since every worker ran"
	bottom.Y.Label.Text = "env steps / s"
	if err := addLine(bottom, rate, color.RGBA{R: 214, G: 39, B: 40, A: 255}); err != nil {
		return err
	}
	const w, h = 8 * vg.Inch, 8 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// addLine adds a line with points; no data leaves the panel empty but valid.
func addLine(p *plot.Plot, xys plotter.XYs, c color.Color) error {
	p.Add(plotter.NewGrid())
	if len(xys) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	line.Color, points.Color = c, c
	points.Radius = vg.Points(1.5)
	p.Add(line, points)
	return nil
}
