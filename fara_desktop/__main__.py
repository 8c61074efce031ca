from fara_desktop.app import main

raise SystemExit(main())
