"""Module timing: every call of an ``nn.Module`` becomes an accgraph region on PyTorch's current
stream, through PyTorch's global module hooks (``instrument(prof, modules=...)`` in
accgraph.torch; Note [Module regions] says how calls are named and what is skipped)."""

from __future__ import annotations

import re
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Pattern, Sequence, Union

from .._accgraph import ErrorCode, ErrorReason, Profiler, Stream
from .._errors import Error, UnavailableError, make_error

# Note [Module regions]: instrument(prof, modules=...) registers one global forward pre-hook
# and one global forward hook (always_call=True where PyTorch has it, so that a forward that
# raises still closes its region) for every nn.Module of the process:
#
# - Names. A call's region is named by the module's qualified name (named_modules()) relative
#   to the module whose region encloses it on the same stream: the path of
#   model.h[3].attn.c_proj is "GPT/h.3/attn/c_proj" (the root by its class name), so reading the
#   path after the root with "/" as "." gives the qualified name. With modules=True the root is
#   the outermost module being called on the thread; with modules=root (or a list of roots)
#   only those trees are timed, each named from its own root. A module the root's tree does not
#   hold (one made in forward) is named by its class. Names are resolved once per (root, module)
#   and cached (a registration of any submodule, through PyTorch's module registration hook,
#   drops the caches).
# - Repeated calls. The second call of a module within one call of its enclosing timed module
#   gets "#2" (then "#3", ...), so every call has its own path; top-level calls are not
#   numbered (each eager one is its own report).
# - Filters. depth: the nesting depth of the call among module calls (the root 0);
#   include/exclude: re.search on the qualified name (the root: its class name). A filtered
#   module is not a region; its children still are when they pass.
# - Streams and skips. The region opens on PyTorch's current stream (the provider
#   instrument() installs); inside an instrumented capture it records into the graph, eagerly
#   it is timed unless eager_modules=False. A call that cannot be timed (begin raises: a stream
#   PyTorch forked inside the capture, a capture accgraph was not told about) runs untimed,
#   counted with Profiler.note_untimed (the stats table's "untimed" lines) and warned about
#   once per reason: the error's reason code (Error.reason, Note [Error reasons] in
#   core/error.cpp), never its wording; an error without one is counted under its error
#   code. Each thread keeps a stack of what each pre-hook did, so a forward hook ends only the
#   region its own pre-hook opened (and frames left by a forward that raised on a PyTorch
#   without always_call are closed by the next forward hook below them).
# - torch.compile. While Dynamo traces, the hooks return at once: nothing is recorded and no
#   graph break is caused (compiled graphs are timed as a whole by graph_region).

UNTIMED_FORK = ("its stream captures into a CUDA graph accgraph was not told about (a stream "
                "PyTorch forked inside an instrumented capture, or a capture begun before "
                "instrument())")
# What the stats table and the warning say for each reason code a module call can fail with.
UNTIMED_REASONS: Dict[ErrorReason, str] = {
    ErrorReason.NATIVE_CAPTURE: UNTIMED_FORK,
    ErrorReason.UNATTACHED_CAPTURE: (
        "its stream captures into a graph the profiler does not time (a graph not attached to "
        "it, or attached after its capture began)"),
    ErrorReason.CAPTURE_ENDED: ("the capture it was recorded in ended, or was aborted or "
                                "reset, while it ran"),
    ErrorReason.REGION_ORDER: ("its region would not nest in the regions open on its stream (a "
                               "region left open across capture_begin or capture_end, or ended "
                               "out of order)"),
}


class _Info:
    """What is resolved once per (root, module): its qualified name, class, and whether the
    include/exclude filters select it."""

    __slots__ = ("ref", "qualname", "cls", "display", "selected", "relative")

    def __init__(self, module: Any, qualname: Optional[str],
                 selector: Callable[[str], bool]) -> None:
        self.ref = weakref.ref(module)
        self.cls = type(module).__name__
        # None: not in the root's tree (named by its class wherever it is called).
        self.qualname = qualname
        self.display = qualname if qualname else self.cls
        self.selected = selector(self.display)
        self.relative: Dict[Optional[str], str] = {}  # enclosing qualname -> region name

    def name_under(self, parent: Optional[str]) -> str:
        """The region name when the enclosing timed module has qualified name `parent` (None:
        no enclosing timed module on the stream)."""
        name = self.relative.get(parent)
        if name is None:
            q = self.qualname
            if q is None or q == "":
                name = self.cls
            elif parent and q.startswith(parent) and q[len(parent):len(parent) + 1] == ".":
                name = q[len(parent) + 1:]
            else:
                name = q
            self.relative[parent] = name
        return name


# What one pre-hook did, a list (the cheapest object to make on the hook path):
# [module, the stream its region opened on (None: no region), its qualified name, the calls of
# each child name seen inside it (repeats; None until one), the root's _Names].
MODULE, STREAM, QUALNAME, CHILDREN, NAMES = range(5)
Frame = List[Any]


class _Names:
    """The qualified names of one root's tree, by id(module) (entries checked against a weak
    reference: an id can be reused)."""

    def __init__(self, root: Any, selector: Callable[[str], bool]) -> None:
        self.root_ref = weakref.ref(root) if root is not None else (lambda: None)
        self.selector = selector
        self.by_id: Dict[int, _Info] = {}
        self.generation = 0
        self.foreign_named = True
        if root is not None:
            for qualname, module in root.named_modules():
                self.by_id[id(module)] = _Info(module, qualname, selector)

    @staticmethod
    def union(roots: List[Any], selector: Callable[[str], bool]) -> "_Names":
        """The names of several trees (modules=roots), each named from its root; modules
        outside them are not timed."""
        names = _Names(None, selector)
        names.foreign_named = False
        for root in reversed(roots):  # the first root's name wins for a shared module
            names.by_id.update(_Names(root, selector).by_id)
        return names

    def foreign(self, module: Any) -> Optional[_Info]:
        """A module its tree does not hold: named by its class (modules=True), or not timed."""
        if not self.foreign_named:
            return None
        info = _Info(module, None, self.selector)
        # Modules made in each forward must not pile up here.
        info.ref = _keep_while_alive(self.by_id, module, info)
        return info


def _keep_while_alive(table: Dict[int, Any], obj: Any, value: Any) -> "weakref.ref[Any]":
    """Stores `value` in `table` under id(obj) until `obj` dies (then the entry goes, unless
    another value replaced it); returns the weak reference to `obj` that does it."""
    key = id(obj)

    def forget(_: Any) -> None:
        if table.get(key) is value:
            del table[key]

    table[key] = value
    return weakref.ref(obj, forget)


def _compile_pattern(what: str, pattern: Union[str, Pattern[str], None]) -> Optional[Pattern[str]]:
    if pattern is None:
        return None
    if isinstance(pattern, str):
        try:
            return re.compile(pattern)
        except re.error as e:
            raise ValueError(f"accgraph.torch.instrument: {what}={pattern!r} is not a valid "
                             f"regular expression ({e}): fix the pattern") from None
    if isinstance(pattern, re.Pattern):
        return pattern
    raise TypeError(f"accgraph.torch.instrument: {what} must be a str or a compiled regular "
                    "expression (or None)")


def _is_compiling(torch: Any) -> Callable[[], bool]:
    """torch.compiler.is_compiling, or torch._dynamo.is_compiling on older PyTorch."""
    compiler = getattr(torch, "compiler", None)
    check = getattr(compiler, "is_compiling", None)
    if check is None:
        check = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return check if check is not None else (lambda: False)


class ModuleTiming:
    """The hooks of one instrument() period (Note [Module regions])."""

    def __init__(self, torch: Any, profiler: Profiler, current: Callable[[], Stream],
                 modules: Any, depth: Optional[int], include: Any, exclude: Any,
                 eager: bool) -> None:
        self.torch = torch
        self.profiler = profiler
        self.current = current
        self.depth = depth
        self.eager = eager
        self.include = _compile_pattern("include", include)
        self.exclude = _compile_pattern("exclude", exclude)
        self.is_compiling = _is_compiling(torch)
        self.tls = threading.local()
        self.lock = threading.Lock()
        self.warned: set = set()
        # Error code -> the message of the first error without a reason code: how the calls
        # it stopped are counted and described (Note [Module regions]).
        self.unspecified: Dict[Optional[ErrorCode], str] = {}
        self.handles: List[Any] = []
        self.generation = 0  # bumped by every submodule registration: name caches are stale
        # modules=True: names per root module (id -> _Names); modules=roots: one _Names per root.
        self.all_modules = modules is True
        self.by_root: Dict[int, _Names] = {}
        self.roots: List["weakref.ref[Any]"] = []
        if not self.all_modules:
            roots: Sequence[Any] = modules if isinstance(modules, (list, tuple)) else [modules]
            module_cls = torch.nn.Module
            for root in roots:
                if not isinstance(root, module_cls):
                    raise TypeError("accgraph.torch.instrument: modules must be True, an "
                                    "nn.Module or a list of nn.Modules (got "
                                    f"{type(root).__name__})")
                self.roots.append(weakref.ref(root))
        self.tree: Optional[_Names] = None
        self.tree_generation = -1

    def set_filters(self, depth: Optional[int], include: Any, exclude: Any) -> None:
        """Changes the filters for the module calls that follow (accgraph.torch.
        set_module_filters: bench/python/bench_modules.py captures one graph per filter under
        one instrument())."""
        self.include = _compile_pattern("include", include)
        self.exclude = _compile_pattern("exclude", exclude)
        self.depth = depth
        self._registered()
        self.tree_generation = -1

    def _selected(self, display: str) -> bool:
        if self.include is not None and self.include.search(display) is None:
            return False
        return self.exclude is None or self.exclude.search(display) is None

    # --- names ---------------------------------------------------------------------------------

    def _names_of_root(self, root: Any) -> Optional["_Names"]:
        """The names of the tree a call of `root` (nothing timed below it) starts (None: with
        modules=roots, a module outside their trees)."""
        if self.all_modules:
            names = self.by_root.get(id(root))
            if names is None or names.root_ref() is not root or names.generation != self.generation:
                names = _Names(root, self._selected)
                names.generation = self.generation
                # Roots made at each step must not pile up here.
                names.root_ref = _keep_while_alive(self.by_root, root, names)
            return names
        if self.tree_generation != self.generation:
            self.tree = _Names.union([r for r in (ref() for ref in self.roots) if r is not None],
                                     self._selected)
            self.tree_generation = self.generation
        return self.tree

    def _registered(self, *args: Any) -> None:
        """PyTorch's module registration hook: a submodule was added somewhere."""
        self.generation += 1
        self.by_root.clear()

    # --- hooks ---------------------------------------------------------------------------------

    def pre_hook(self, module: Any, args: Any) -> None:
        if self.is_compiling():
            return None
        try:
            stack = self.tls.stack
        except AttributeError:
            stack = self.tls.stack = []
        names = stack[0][NAMES] if stack else self._names_of_root(module)
        if names is None:
            return None
        info = names.by_id.get(id(module))
        if info is None or info.ref() is not module:
            info = names.foreign(module)
            if info is None:
                return None
        if not info.selected or (self.depth is not None and len(stack) > self.depth):
            stack.append([module, None, info.qualname, None, names])
            return None
        try:
            stream = self.current()
            if not self.eager and not stream.is_capturing:
                stack.append([module, None, info.qualname, None, names])
                return None
        except Error as e:
            self._untimed(info.display, self._reason_of(e))
            stack.append([module, None, info.qualname, None, names])
            return None
        parent = None
        for frame in reversed(stack):
            if frame[STREAM] is stream:
                parent = frame
                break
        if parent is None:
            name = info.name_under(None)
        else:
            name = info.name_under(parent[QUALNAME])
            children = parent[CHILDREN]
            if children is None:
                children = parent[CHILDREN] = {}
            count = children.get(name, 0) + 1
            children[name] = count
            if count > 1:
                name = f"{name}#{count}"
        try:
            self.profiler.begin(stream, name, module=info.cls)
        except Error as e:
            self._untimed(info.display, self._reason_of(e))
            stream = None
        stack.append([module, stream, info.qualname, None, names])
        return None

    def post_hook(self, module: Any, args: Any, output: Any) -> None:
        if self.is_compiling():
            return None
        try:
            stack = self.tls.stack
        except AttributeError:
            return None
        if not stack:
            return None
        if stack[-1][MODULE] is not module:
            # Frames above this module's own: their forward raised on a PyTorch whose forward
            # hooks are not always called (or another pre-hook raised before this module's).
            for index in range(len(stack) - 2, -1, -1):
                if stack[index][MODULE] is module:
                    break
            else:
                return None  # its pre-hook pushed nothing (compiling, not timed)
            while len(stack) > index + 1:
                self._close(stack.pop())
        frame = stack.pop()
        if frame[STREAM] is not None:
            self._close(frame)
        return None

    def _close(self, frame: Frame) -> None:
        if frame[STREAM] is None:
            return
        try:
            self.profiler.end(frame[STREAM])
        except Error as e:
            self._untimed(frame[QUALNAME] or type(frame[MODULE]).__name__, self._reason_of(e))

    def _reason_of(self, error: Error) -> str:
        """Why a call was not timed: by the error's reason code, never by its wording."""
        reason = UNTIMED_REASONS.get(error.reason)
        if reason is not None:
            return reason
        with self.lock:
            return self.unspecified.setdefault(error.code, error.message)

    def _untimed(self, name: str, reason: str) -> None:
        self.profiler.note_untimed(name, reason)
        with self.lock:
            if reason in self.warned:
                return
            self.warned.add(reason)
        warnings.warn(f"accgraph.torch: module {name} is not timed: {reason} (every module call "
                      "not timed for this reason is counted in the profiler's stats table)",
                      RuntimeWarning, stacklevel=3)

    # --- install and remove --------------------------------------------------------------------

    def install(self) -> None:
        """Registers the global hooks (forward hook with always_call where PyTorch has it)."""
        hooks = self.torch.nn.modules.module
        if not hasattr(hooks, "register_module_forward_pre_hook"):
            raise make_error(UnavailableError,
                             f"accgraph.torch.instrument: PyTorch {self.torch.__version__} has no "
                             "global module hooks (torch.nn.modules.module."
                             "register_module_forward_pre_hook): module timing needs PyTorch "
                             ">= 2.0 (regions by hand work without it)")
        try:
            self.handles.append(hooks.register_module_forward_pre_hook(self.pre_hook))
            try:
                post = hooks.register_module_forward_hook(self.post_hook, always_call=True)
            except TypeError:  # PyTorch < 2.1: no always_call
                post = hooks.register_module_forward_hook(self.post_hook)
            self.handles.append(post)
            registration = getattr(hooks, "register_module_module_registration_hook", None)
            if registration is not None:
                self.handles.append(registration(self._registered))
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        """Removes every hook and drops the caches (and the profiler)."""
        handles, self.handles = self.handles, []
        for handle in handles:
            handle.remove()
        self.by_root.clear()
        self.tree = None
        self.roots = []
        self.tls = threading.local()
