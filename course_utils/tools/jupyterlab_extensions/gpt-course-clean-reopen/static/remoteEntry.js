/*
 * gpt-course-clean-reopen: a notebook reopened without edits stays unmarked.
 *
 * The widget manager (@jupyter-widgets/jupyterlab-manager) marks a notebook unsaved whenever it
 * registers a widget model while its saveState setting is on, which the course turns on so that a
 * saved lesson draws its widgets again. Restoring those saved models when a lesson opens therefore
 * marks it unsaved although nothing changed ("Save your work?" on close); so does JupyterLab when
 * the kernel's Python differs from the one the lesson was published with, as it writes the
 * kernel's language_info (and kernelspec) into the notebook's metadata. This plugin clears the
 * mark when no edit of the notebook's content (cells, outputs, other metadata) happened since it
 * was loaded or last saved; any real edit keeps it.
 *
 * JupyterLab loads an extension as a module federation container (window._JUPYTERLAB[name], with
 * init(shareScope) and get(module)); this one is that interface written out in plain JavaScript,
 * so it needs no build step. It takes INotebookTracker from the @jupyterlab/notebook module
 * JupyterLab shares. Installed by `gpt-course open` / `make course` (open_course.py).
 */
(function () {
  'use strict';
  const NAME = 'gpt-course-clean-reopen';
  // What JupyterLab writes from the kernel it connects to, not an edit by the student.
  const KERNEL_METADATA = new Set(['language_info', 'kernelspec']);
  let notebookModule = null;

  async function sharedModule(shareScope, name) {
    const versions = shareScope[name] || {};
    const entries = Object.values(versions);
    const entry = entries.find(e => e.loaded) || entries.find(e => e.eager) || entries[0];
    if (!entry) {
      throw new Error(`${NAME}: JupyterLab shares no ${name}`);
    }
    return (await entry.get())();
  }

  function keepCleanUntilEdited(panel) {
    const context = panel.context;
    void context.ready.then(() => {
      const model = context.model;
      let edited = false;
      let fromKernel = false; // the content change under way is kernel metadata alone
      model.metadataChanged.connect((_, change) => {
        fromKernel = KERNEL_METADATA.has(change.key);
      });
      model.contentChanged.connect(() => {
        // JupyterLab emits a metadata change and then the content change it makes, at once
        edited = edited || !fromKernel;
        fromKernel = false;
      });
      context.fileChanged.connect(() => {
        edited = false; // saved or reverted: the notebook is the file again
      });
      model.stateChanged.connect((_, change) => {
        if (change.name === 'dirty' && change.newValue && !edited) {
          model.dirty = false;
        }
      });
    });
  }

  const plugin = {
    id: `${NAME}:plugin`,
    description: 'A notebook reopened without edits is not marked unsaved.',
    autoStart: true,
    activate: (app, tracker) => {
      tracker.forEach(keepCleanUntilEdited);
      tracker.widgetAdded.connect((_, panel) => keepCleanUntilEdited(panel));
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: async shareScope => {
      notebookModule = await sharedModule(shareScope, '@jupyterlab/notebook');
    },
    get: async () => () => ({
      __esModule: true,
      default: Object.assign({ requires: [notebookModule.INotebookTracker] }, plugin)
    })
  };
})();
