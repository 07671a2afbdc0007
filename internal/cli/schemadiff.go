package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func schemaDiffCommand() *cobra.Command {
	var (
		context int
		deleted bool
	)
	cmd := &cobra.Command{
		Use:   "diff SUBJECT V1 V2",
		Short: "A unified line diff of two versions of a subject, pretty-printed",
		Long: `A unified line diff of two versions of a subject (each a number or latest),
Avro and JSON schemas pretty-printed one member a line first, so that an
added field is an added line. The exit status is 0 whatever the difference.`,
		Example: `  sluice schema diff orders-value 1 latest
  sluice schema diff orders-value 2 3 --context 10`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if context < 0 {
				return fmt.Errorf("%w: --context %d: want 0 or more", ErrBadFlag, context)
			}
			r, err := newRegistry(cmd)
			if err != nil {
				return err
			}
			var vs [2]subjectVersion
			for i, a := range args[1:] {
				n, err := parseVersion(a)
				if err != nil {
					return err
				}
				if vs[i], err = r.version(cmd.Context(), args[0], n, deleted); err != nil {
					return err
				}
			}
			name := func(v subjectVersion) string {
				return fmt.Sprintf("%s version %d (id %d, %s)", v.Subject, v.Version, v.ID, v.typeName())
			}
			return writeUnifiedDiff(cmd.OutOrStdout(), name(vs[0]), name(vs[1]),
				lines(pretty(vs[0].typeName(), vs[0].Schema)), lines(pretty(vs[1].typeName(), vs[1].Schema)), context)
		},
	}
	cmd.Flags().IntVarP(&context, "context", "U", 3, "lines of context around each change")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "find soft-deleted versions too")
	return cmd
}

// lines splits text into lines without their line ends (trailing spaces
// dropped, so that they do not make differences nobody sees).
func lines(text string) []string {
	text = strings.TrimRight(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if text == "" {
		return nil
	}
	out := strings.Split(text, "\n")
	for i, l := range out {
		out[i] = strings.TrimRight(l, " \t")
	}
	return out
}

// edit is one line of a diff: ' ' kept, '-' only in a, '+' only in b.
type edit struct {
	op   byte
	line string
}

// maxDiffCells bounds the longest-common-subsequence table (4 bytes a
// cell): past it, the changed middle is shown as removed and added whole.
const maxDiffCells = 4 << 20

// diffLines is a shortest-edit line diff of a and b: the common head and
// tail are kept, the middle aligned on a longest common subsequence.
func diffLines(a, b []string) []edit {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var out []edit
	for _, l := range a[:head] {
		out = append(out, edit{' ', l})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	n, m := len(ma), len(mb)
	if n > 0 && m > 0 && n*m <= maxDiffCells {
		// lcs[i*(m+1)+j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([]int32, (n+1)*(m+1))
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
				} else {
					lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n && j < m {
			switch {
			case ma[i] == mb[j]:
				out = append(out, edit{' ', ma[i]})
				i++
				j++
			case lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]:
				out = append(out, edit{'-', ma[i]})
				i++
			default:
				out = append(out, edit{'+', mb[j]})
				j++
			}
		}
		ma, mb = ma[i:], mb[j:]
	}
	for _, l := range ma {
		out = append(out, edit{'-', l})
	}
	for _, l := range mb {
		out = append(out, edit{'+', l})
	}
	for _, l := range a[len(a)-tail:] {
		out = append(out, edit{' ', l})
	}
	return out
}

// writeUnifiedDiff writes the diff of a and b in the unified format (as
// diff -u and git diff do), with context lines around each change. Equal
// inputs write a line saying so.
func writeUnifiedDiff(w io.Writer, nameA, nameB string, a, b []string, context int) error {
	edits := diffLines(a, b)
	changed := false
	for _, e := range edits {
		changed = changed || e.op != ' '
	}
	if !changed {
		_, err := fmt.Fprintf(w, "no difference between %s and %s\n", nameA, nameB)
		return err
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", nameA, nameB)
	// Line numbers (0-based) in a and b before each edit.
	posA, posB := make([]int, len(edits)+1), make([]int, len(edits)+1)
	for i, e := range edits {
		posA[i+1], posB[i+1] = posA[i], posB[i]
		if e.op != '+' {
			posA[i+1]++
		}
		if e.op != '-' {
			posB[i+1]++
		}
	}
	for i := 0; i < len(edits); {
		if edits[i].op == ' ' {
			i++
			continue
		}
		// A hunk: from context lines before this change to context lines
		// after the last change less than 2*context+1 kept lines away.
		start := max(0, i-context)
		end := i
		for j := i; j < len(edits); j++ {
			if edits[j].op != ' ' {
				end = j + 1
			} else if j-end >= 2*context {
				break
			}
		}
		stop := min(len(edits), end+context)
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(posA[start], posA[stop]-posA[start]),
			hunkRange(posB[start], posB[stop]-posB[start]))
		for _, e := range edits[start:stop] {
			fmt.Fprintf(w, "%c%s\n", e.op, e.line)
		}
		i = stop
	}
	return nil
}

// hunkRange is a hunk's start,count as diff -u writes it: 1-based, the
// count left out when 1, and the line before when the range is empty.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
