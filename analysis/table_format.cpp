#include "analysis/table_format.h"

#include <sstream>

namespace draftlab::analysis {

namespace {

// Markdown column names: the group label joined to the column ("MT-bench speedup").
std::vector<std::string> flat_columns(const Table& t) {
  std::vector<std::string> out = t.columns;
  size_t col = 0;
  for (const auto& [label, span] : t.groups) {
    for (int k = 0; k < span && col < out.size(); ++k, ++col)
      if (!label.empty()) out[col] = label + " " + out[col];
  }
  return out;
}

std::string md_cell(const Cell& c) {
  std::string text;
  for (char ch : c.text) text += ch == '|' ? std::string("\\|") : std::string(1, ch);
  if (c.bold && !text.empty()) return "**" + text + "**";
  return text;
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::ostringstream s;
  s << "### " << report.heading << "\n\n";
  for (const Table& t : report.tables) {
    if (!t.title.empty()) s << "**" << t.title << "**\n\n";
    const std::vector<std::string> cols = flat_columns(t);
    s << "|";
    for (const std::string& c : cols) s << " " << c << " |";
    s << "\n|";
    for (size_t i = 0; i < cols.size(); ++i) s << " --- |";
    s << "\n";
    for (const auto& row : t.rows) {
      s << "|";
      for (const Cell& c : row) s << " " << md_cell(c) << " |";
      s << "\n";
    }
    s << "\n";
    for (const std::string& n : t.notes) s << n << "\n\n";
  }
  s << "_" << report.caption << "_\n";
  return s.str();
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    // UTF-8 sequences of the symbols the tables use.
    if (text.compare(i, 2, "τ") == 0) { out += "$\\tau$"; ++i; continue; }
    if (text.compare(i, 2, "α") == 0) { out += "$\\alpha$"; ++i; continue; }
    if (text.compare(i, 2, "×") == 0) { out += "$\\times$"; ++i; continue; }
    if (text.compare(i, 2, "±") == 0) { out += "$\\pm$"; ++i; continue; }
    if (text.compare(i, 3, "–") == 0) { out += "--"; i += 2; continue; }
    if (text.compare(i, 3, "—") == 0) { out += "---"; i += 2; continue; }
    if (text.compare(i, 3, "←") == 0) { out += "$\\leftarrow$"; i += 2; continue; }
    switch (ch) {
      case '_': case '%': case '&': case '#': case '$': case '{': case '}': out += '\\'; out += ch; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '\\': out += "\\textbackslash{}"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string render_latex(const Report& report) {
  std::ostringstream s;
  s << "% " << latex_escape(report.heading) << "\n";
  for (const Table& t : report.tables) {
    s << "\\begin{table}[t]\n\\centering\n";
    s << "\\begin{tabular}{l" << std::string(t.columns.size() > 0 ? t.columns.size() - 1 : 0, 'c') << "}\n\\toprule\n";
    if (!t.title.empty())
      s << "\\multicolumn{" << t.columns.size() << "}{c}{" << latex_escape(t.title) << "} \\\\\n\\midrule\n";
    if (!t.groups.empty()) {
      bool first = true;
      for (const auto& [label, span] : t.groups) {
        if (!first) s << " & ";
        first = false;
        if (span == 1) s << latex_escape(label);
        else s << "\\multicolumn{" << span << "}{c}{" << latex_escape(label) << "}";
      }
      s << " \\\\\n";
    }
    for (size_t i = 0; i < t.columns.size(); ++i) s << (i ? " & " : "") << latex_escape(t.columns[i]);
    s << " \\\\\n\\midrule\n";
    for (const auto& row : t.rows) {
      for (size_t i = 0; i < row.size(); ++i) {
        const std::string cell = latex_escape(row[i].text);
        s << (i ? " & " : "") << (row[i].bold && !cell.empty() ? "\\textbf{" + cell + "}" : cell);
      }
      s << " \\\\\n";
    }
    s << "\\bottomrule\n\\end{tabular}\n";
    std::string caption = report.heading + ". " + report.caption;
    for (const std::string& n : t.notes) caption += " " + n;
    s << "\\caption{" << latex_escape(caption) << "}\n\\end{table}\n\n";
  }
  return s.str();
}

}  // namespace draftlab::analysis
