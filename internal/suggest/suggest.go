// Package suggest finds the word a user most likely meant: the nearest of
// a set of known words by edit distance, for "did you mean" hints on
// mistyped URL schemes, flags and setting values.
package suggest

// Closest returns the candidate nearest to word, and false when none is
// near enough to be a plausible typo: at most one edit for words of up to
// four letters, at most two for longer ones. A word that is itself a
// candidate has nothing to correct; of two equally near candidates the
// first wins.
func Closest(word string, candidates []string) (string, bool) {
	best, bestDist := "", maxEdits(word)+1
	for _, c := range candidates {
		if c == word {
			return "", false
		}
		if d := Distance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// maxEdits is how far a typo of word may be from what was meant.
func maxEdits(word string) int {
	if len([]rune(word)) <= 4 {
		return 1
	}
	return 2
}

// Distance is the Damerau–Levenshtein (optimal string alignment) distance
// between a and b, in runes: insertions, deletions, substitutions and
// swaps of two adjacent runes each count one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
