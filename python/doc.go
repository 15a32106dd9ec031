// Package python embeds distrl's Python package (the distrl/ directory
// beside this file: the environment host, the control-protocol client and
// the example environments), so that a distrl binary can start its Python
// environment host without the package being installed: [Dir] writes the
// files to a directory to put on PYTHONPATH.
//
// Users who write Python against distrl install the same files with
// `pip install -e python/`.
package python
