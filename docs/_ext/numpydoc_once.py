"""numpydoc, with its docstring template compiled once per build instead of once per documented object.

numpydoc's ``get_doc_object`` builds a Jinja environment and compiles ``numpydoc_docstring.rst`` on every call
(two calls per API object: the docstring and its validation; what that costs: docs/README.md). Its
``setup`` takes the function to use instead (``get_doc_object_``); this one lets numpydoc compile the template
on the first call for each builder (numpydoc's own loader: the site's ``templates_path`` first) and hands the
compiled template to numpydoc's document classes after that. The rendered pages are unchanged.
"""

from __future__ import annotations

from numpydoc import docscrape, docscrape_sphinx
from numpydoc import numpydoc as _numpydoc

_TEMPLATES: dict[int, object] = {}     # id(builder) -> numpydoc's compiled docstring template


def get_doc_object(obj, what=None, doc=None, config=None, builder=None):
    """numpydoc's ``docscrape_sphinx.get_doc_object`` with the template compiled once per builder."""
    config = {} if config is None else config
    template = _TEMPLATES.get(id(builder))
    if template is None:                # numpydoc's own path: it compiles the template into `config`
        result = docscrape_sphinx.get_doc_object(obj, what=what, doc=doc, config=config, builder=builder)
        _TEMPLATES[id(builder)] = config["template"]
        return result
    config["template"] = template
    return docscrape.get_doc_object(obj, what=what, doc=doc, config=config,
                                    class_doc=docscrape_sphinx.SphinxClassDoc,
                                    func_doc=docscrape_sphinx.SphinxFunctionDoc,
                                    obj_doc=docscrape_sphinx.SphinxObjDoc)


def setup(app):
    _TEMPLATES.clear()                  # a new build (sphinx in the same process) compiles it again
    return _numpydoc.setup(app, get_doc_object_=get_doc_object)
