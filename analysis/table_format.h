// A small table model and its Markdown / LaTeX renderings, for `draftlab table`.
//
// Cell text is plain Unicode (τ, α, ×, –); the LaTeX renderer escapes it and turns τ and α into math.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace draftlab::analysis {

struct Cell {
  std::string text;
  bool bold = false;  // the best point of a sweep, the paper's winner
  Cell(const char* t) : text(t) {}  // NOLINT: rows are written as brace lists of strings
  Cell(std::string t, bool b = false) : text(std::move(t)), bold(b) {}
};

struct Table {
  std::string title;                               // e.g. "Temperature = 0"; may be empty
  std::vector<std::pair<std::string, int>> groups;  // optional spanning header row: label, columns spanned
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> notes;  // lines printed under the table
};

struct Report {
  std::string heading;  // "EAGLE-2 Table 1: speedup and τ per dataset"
  std::string caption;  // the machine and models the numbers come from
  std::vector<Table> tables;
};

std::string render_markdown(const Report& report);
std::string render_latex(const Report& report);
// Aligned plain text for a terminal: every column as wide as its widest cell (counted in characters, so τ is one),
// text left-aligned, numbers right-aligned, bold cells marked with a trailing '*'.
std::string render_text(const Table& table);
std::string render_text(const Report& report);

// The report as `draftlab table` / `bounds` --format names it: md, latex or text. check_format throws Error on
// another name (commands call it before reading anything), as render does.
void check_format(const std::string& format);
std::string render(const Report& report, const std::string& format);

// LaTeX-safe text: escapes specials, τ -> $\tau$, α -> $\alpha$.
std::string latex_escape(const std::string& text);

}  // namespace draftlab::analysis
