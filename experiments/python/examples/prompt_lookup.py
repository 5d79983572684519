"""Prompt lookup decoding written in Python: the C++ `pld` (strategies/pld/prompt_lookup.cpp) in ~30 lines.

Take the last n tokens (n = max_ngram down to min_ngram), find their most recent earlier occurrence and propose
what followed it as a chain; past the end of the sequence the copy continues from the draft itself. Same tokens
and tau as `pld` (tests/python/test_module.py), so the two differ only in what a cycle costs.

    import draftlab, prompt_lookup
    draftlab.register_strategy("py_pld", prompt_lookup.PromptLookup, prompt_lookup.OPTIONS)
    draftlab.Model("data/models/ts-target").generate("once upon a time", strategy="py_pld")
"""
import draftlab

OPTIONS = {"max_ngram": 3, "min_ngram": 1, "num_tokens": 10}


class PromptLookup(draftlab.Strategy):
    def __init__(self, options):
        self.max_ngram, self.min_ngram = int(options["max_ngram"]), int(options["min_ngram"])
        self.num_tokens = int(options["num_tokens"])

    def propose(self, request):
        seq = request["sequence"]
        budget = min(self.num_tokens, request["max_nodes"], request["tokens_wanted"])
        start = self.continuation(seq) if budget > 0 else -1
        if start < 0:
            return None
        tree, draft = draftlab.Tree(), []
        for pos in range(start, start + budget):
            draft.append(seq[pos] if pos < len(seq) else draft[pos - len(seq)])
            tree.add(draft[-1], parent=len(draft) - 2)  # a chain: each node under the previous one
        return tree

    def continuation(self, seq):
        """Where the most recent earlier occurrence of the longest matching suffix ends, or -1."""
        for n in range(min(self.max_ngram, len(seq) - 1), self.min_ngram - 1, -1):
            suffix = seq[-n:]
            for end in range(len(seq) - 1, n - 1, -1):
                if seq[end - n:end] == suffix:
                    return end
        return -1
