// jinja2 resolves variable scoping when it compiles a template (jinja2/idtracking.py): every frame (the template,
// a loop body, a macro, a call block, ...) knows which names it assigns. A name a frame assigns before it has read
// it, and which no enclosing frame knows, starts out *undefined* in that frame - so a nested loop or macro that
// reads it before the assignment runs sees an undefined value, not the render context's value. This pass computes
// those names per frame with the same rules (including if-branch merging) and stores them in the AST, so that the
// interpreter can declare them when it enters the frame.
#pragma once

#include "chat/jinja_ast.h"

namespace msa::jinja {

void annotate_frames(TemplateAst& ast);

}  // namespace msa::jinja
