"""The plugin object QGIS creates: provider registration, toolbar button and Vector menu."""

from __future__ import annotations

from qgis.core import Qgis, QgsApplication, QgsMessageLog
from qgis.PyQt.QtWidgets import QAction, QMenu, QMessageBox, QPushButton, QToolButton

from .algorithms import algorithms
from .deps import dpgeo_available
from .provider import PROVIDER_ID, DpgeoProvider
from .resources import ICON_PATH, plugin_icon

__all__ = ["DpgeoPlugin", "plugin_icon", "ICON_PATH", "MENU_NAME", "MAIN_ALGORITHM"]

#: Name of the submenu of the Vector menu.
MENU_NAME = "&dpgeo"
#: Algorithm opened by the toolbar button.
MAIN_ALGORITHM = f"{PROVIDER_ID}:dbscanspans"
LOG_TAG = "dpgeo"


class DpgeoPlugin:
    """Registers the "dpgeo" Processing provider and, in the desktop, a toolbar button and menu entries."""

    def __init__(self, iface):
        self.iface = iface
        self.provider = None
        self.toolbar_action = None
        self.menu_actions = []
        self._menu = None

    # -- Processing ------------------------------------------------------------
    def initProcessing(self):  # noqa: N802 (QGIS API)
        if self.provider is None:
            self.provider = DpgeoProvider()
            QgsApplication.processingRegistry().addProvider(self.provider)

    # -- GUI -------------------------------------------------------------------
    def initGui(self):  # noqa: N802 (QGIS API)
        self.initProcessing()
        parent = self.iface.mainWindow()

        # one entry per algorithm the provider has (one per mechanism the library declares)
        for alg_id, text in [(f"{PROVIDER_ID}:{a.name()}", f"{a.displayName()}…") for a in algorithms()]:
            action = QAction(plugin_icon(), text, parent)
            action.setObjectName(f"dpgeo_menu_{alg_id.split(':')[1]}")
            action.triggered.connect(lambda _checked=False, a=alg_id: self.open_dialog(a))
            self.iface.addPluginToVectorMenu(MENU_NAME, action)
            self.menu_actions.append(action)

        self.toolbar_action = QAction(plugin_icon(), "dpgeo: DP cluster map (DP-DBSCAN spans)…", parent)
        self.toolbar_action.setObjectName("dpgeo_toolbar_action")
        self.toolbar_action.setToolTip("Differentially private cluster map of a point layer (dpgeo)")
        self.toolbar_action.triggered.connect(lambda _checked=False: self.open_dialog(MAIN_ALGORITHM))
        self._menu = QMenu(parent)
        for action in self.menu_actions:
            self._menu.addAction(action)
        self.toolbar_action.setMenu(self._menu)
        self.iface.addToolBarIcon(self.toolbar_action)
        try:  # show the menu arrow next to the button
            button = self.iface.pluginToolBar().widgetForAction(self.toolbar_action)
            if isinstance(button, QToolButton):
                button.setPopupMode(QToolButton.MenuButtonPopup)
        except Exception:
            pass

        ok, message = dpgeo_available()
        if not ok:
            self._warn_missing_dpgeo(message)

    def _warn_missing_dpgeo(self, message: str):
        QgsMessageLog.logMessage(message, LOG_TAG, Qgis.Warning)
        try:
            bar = self.iface.messageBar()
            item = bar.createMessage("dpgeo", "The dpgeo Python library cannot be imported; the plugin's "
                                              "algorithms will not run until it is installed.")
            button = QPushButton("How to fix", item)
            button.clicked.connect(
                lambda: QMessageBox.information(self.iface.mainWindow(), "dpgeo: install the library", message))
            item.layout().addWidget(button)
            bar.pushWidget(item, Qgis.Warning, 0)
        except Exception:  # a minimal iface (tests) may have no message bar
            pass

    def open_dialog(self, algorithm_id: str):
        """Open the Processing dialog of ``algorithm_id`` (e.g. ``dpgeo:dbscanspans``).

        If the dpgeo library cannot be found, say how to install it instead.
        """
        ok, message = dpgeo_available()
        if not ok:
            QMessageBox.warning(self.iface.mainWindow(), "dpgeo: install the library", message)
            return None
        import processing

        return processing.execAlgorithmDialog(algorithm_id)

    # -- unloading -------------------------------------------------------------
    def unload(self):
        for action in self.menu_actions:
            self.iface.removePluginVectorMenu(MENU_NAME, action)
            action.deleteLater()
        self.menu_actions = []
        if self.toolbar_action is not None:
            self.iface.removeToolBarIcon(self.toolbar_action)
            self.toolbar_action.deleteLater()
            self.toolbar_action = None
        if self._menu is not None:
            self._menu.deleteLater()
            self._menu = None
        if self.provider is not None:
            QgsApplication.processingRegistry().removeProvider(self.provider)
            self.provider = None
