package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"
)

// stdinName is how messages name standard input, read with -f -.
const stdinName = "standard input"

// fileFlags are -f and -R, read as kubectl reads them.
type fileFlags struct {
	filenames []string
	recursive bool
}

// addFlags adds -f, required, and -R to cmd; usage says what -f holds.
func (f *fileFlags) addFlags(cmd *cobra.Command, usage string) {
	flags := cmd.Flags()
	flags.StringSliceVarP(&f.filenames, "filename", "f", nil, usage+"; a file, a directory (its .json, .yaml and .yml files), or - for standard input; repeat it, or separate with commas")
	flags.BoolVarP(&f.recursive, "recursive", "R", false, "read the subdirectories of the directories -f names too")
	mustMark(cmd.MarkFlagRequired("filename"))
	mustMark(cmd.MarkFlagFilename("filename", "yaml", "yml", "json"))
}

// object is one object of the manifests, and where it was read: a file,
// or standard input.
type object struct {
	source string
	*unstructured.Unstructured
}

// manifests are the objects -f names, in order, and what standard input
// held when -f - read it.
type manifests struct {
	objects []object
	stdin   []byte
}

// read reads the objects of the files -f names as kubectl reads them, with
// cli-runtime's resource builder and no server: -f repeated, a directory
// (its .json, .yaml and .yml files; with -R its subdirectories' too), - for
// standard input, documents separated by ---, and the items of a List in
// place of the List. The objects are unstructured: a field the JobSet's
// schema does not know reaches strict field validation.
//
// Input with no object at all is an error, not a silent success; so is a
// URL, which kubectl would fetch: the commands that read -f stay offline.
func (f *fileFlags) read(stdin io.Reader) (*manifests, error) {
	m := &manifests{}
	b := resource.NewLocalBuilder().Unstructured().Flatten()
	sources, readStdin := 0, false
	deeper := "" // a directory whose subdirectories alone hold files
	for _, name := range f.filenames {
		switch {
		case name == "-":
			if readStdin {
				return nil, usageErrorf("-f - is given twice: standard input can be read once")
			}
			readStdin = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", stdinName, err)
			}
			m.stdin = data
			b.Stream(bytes.NewReader(data), stdinName)
			sources++
		case strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://"):
			return nil, usageErrorf("-f %s: URLs are not read, only files and standard input: download it, or pipe it to -f -", name)
		default:
			// As the builder would, with the system's words for why.
			fi, err := os.Stat(name)
			if err != nil {
				return nil, err
			}
			if fi.IsDir() {
				found, err := hasManifestFiles(name, f.recursive)
				if err != nil {
					return nil, fmt.Errorf("reading %s: %w", name, err)
				}
				if !found {
					// The builder refuses a directory without a file
					// only when nothing was named before it: here such a
					// directory adds no object, wherever it is.
					if below, _ := hasManifestFiles(name, true); below && !f.recursive {
						deeper = name
					}
					continue
				}
			}
			b.Path(f.recursive, name)
			sources++
		}
	}
	if sources > 0 {
		infos, err := b.Do().Infos()
		if err != nil {
			return nil, err
		}
		for _, info := range infos {
			u, ok := info.Object.(*unstructured.Unstructured)
			if !ok {
				return nil, fmt.Errorf("%s: %T is not an object", sourceName(info.Source), info.Object)
			}
			m.objects = append(m.objects, object{source: sourceName(info.Source), Unstructured: u})
		}
	}
	if len(m.objects) == 0 {
		hint := ""
		if deeper != "" {
			hint = fmt.Sprintf(" (the subdirectories of %s hold some: -R reads them)", deeper)
		}
		return nil, fmt.Errorf("%s: no object in it%s: give a JobSet manifest", strings.Join(f.names(), ", "), hint)
	}
	return m, nil
}

// names are the names of the files -f names, standard input by its name.
func (f *fileFlags) names() []string {
	names := make([]string, len(f.filenames))
	for i, name := range f.filenames {
		names[i] = sourceName(name)
	}
	return names
}

func sourceName(source string) string {
	if source == "-" {
		return stdinName
	}
	return source
}

// hasManifestFiles says whether dir holds a file the builder reads: one of
// resource.FileExtensions, in dir, or with recursive in its subdirectories.
func hasManifestFiles(dir string, recursive bool) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != dir && !recursive:
			return filepath.SkipDir
		case !d.IsDir() && slices.Contains(resource.FileExtensions, filepath.Ext(path)):
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// raw is what source held: standard input, or the file.
func (m *manifests) raw(source string) ([]byte, error) {
	if source == stdinName {
		return m.stdin, nil
	}
	return os.ReadFile(source)
}

// duplicateKeys finds a key given twice in one mapping of data, a stream
// of YAML documents or of JSON objects. The builder converts each
// document to JSON as kubectl does, which keeps the last value of such a
// key and drops the others: kubectl sends the API server no duplicate.
func duplicateKeys(data []byte) error {
	if _, _, isJSON := utilyaml.GuessJSONStream(bytes.NewReader(data), 4096); isJSON {
		return jsonDuplicateKeys(data)
	}
	// Split as the builder's YAML reader splits, keeping each document's
	// first line: padded with the lines before it, a document's errors
	// name the line of data.
	var doc []byte
	start := 0
	check := func() error {
		if len(bytes.TrimSpace(doc)) == 0 {
			return nil
		}
		var v any
		return yaml.UnmarshalStrict(append(bytes.Repeat([]byte("\n"), start), doc...), &v)
	}
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("---")); ok {
			if rest = bytes.TrimSpace(rest); len(rest) == 0 || rest[0] == '#' {
				if err := check(); err != nil {
					return err
				}
				doc, start = nil, i+1
				continue
			}
		}
		doc = append(doc, line...)
	}
	return check()
}

// jsonDuplicateKeys finds a key given twice in one object of data, a
// stream of JSON values, and names it by its path.
func jsonDuplicateKeys(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	var value func(path string) error
	value = func(path string) error {
		t, err := d.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				t, err := d.Token()
				if err != nil {
					return err
				}
				key, _ := t.(string)
				p := key
				if path != "" {
					p = path + "." + key
				}
				if seen[key] {
					return fmt.Errorf("json: duplicate field %q", p)
				}
				seen[key] = true
				if err := value(p); err != nil {
					return err
				}
			}
		case json.Delim('['):
			for i := 0; d.More(); i++ {
				if err := value(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		default:
			return nil
		}
		_, err = d.Token() // the closing delimiter
		return err
	}
	for {
		if err := value(""); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
